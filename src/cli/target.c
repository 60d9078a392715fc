/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nodes.h"
#include "target.h"

int cli_target_open(cli_target *t, const cli_config *cfg, const char *name)
{
	dlock_client_options copts = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_lock_options lopts = DLOCK_LOCK_OPTIONS_INIT;
	size_t i;
	int rc;

	memset(t, 0, sizeof(*t));
	t->mode = cfg->mode;
	t->fenced = cfg->fenced;
	t->quiet = cfg->quiet;
	lopts.kind = cfg->fenced ? DLOCK_LOCK_FENCED
			: cfg->fair ? DLOCK_LOCK_FAIR
			: cfg->rw_half != 0 ? (dlock_lock_kind)cfg->rw_half : DLOCK_LOCK_PLAIN;
	t->n = cfg->n;
	t->name = name;
	copts.connect_timeout_ms = cfg->timeout_ms;
	copts.command_timeout_ms = cfg->timeout_ms;
	copts.watchdog_timeout_ms = cfg->watchdog_ms;
	copts.lazy_connect = 1;
	copts.first_contact_timeout_ms = CLI_FIRST_CONTACT_MS;
	copts.sync_replicas = cfg->sync_replicas;
	copts.sync_timeout_ms = cfg->sync_timeout_ms;
	copts.sync_aof = cfg->sync_aof;
	copts.watch_force_unlock = cfg->watch_force_unlock;
	copts.tls_ca_file = cfg->tls_ca;
	copts.tls_ca_dir = cfg->tls_ca_dir;
	copts.tls_cert_file = cfg->tls_cert;
	copts.tls_key_file = cfg->tls_key;
	copts.tls_server_name = cfg->tls_server_name;
	copts.tls_insecure = cfg->tls_insecure;
	copts.sentinel_user = cfg->sentinel_user;
	copts.sentinel_password = cfg->sentinel_password;
	copts.label = cfg->label;
	copts.command = cfg->command;
	t->permits = cfg->permits;
	t->clients = calloc(t->n, sizeof(*t->clients));
	t->locks = calloc(t->n, sizeof(*t->locks));
	if (t->clients == NULL || t->locks == NULL)
		return DLOCK_ENOMEM;
	for (i = 0; i < t->n; i++) {
		rc = dlock_client_new(&t->clients[i], cfg->nodes[i], &copts);
		if (rc < 0) {
			t->failed_node = i + 1;
			return rc;
		}
		if (cfg->permits > 0)
			return cli_permit_open(t, cfg); /* one node (main.c checks) */
		rc = dlock_lock_new(&t->locks[i], t->clients[i], name, &lopts);
		if (rc < 0)
			return rc;
	}
	if (t->mode == MODE_REDLOCK) {
		dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;

		ro.restart_guard_ms = cfg->restart_guard_ms;
		return dlock_redlock_new(&t->redlock, t->locks, t->n, &ro);
	}
	if (t->mode == MODE_MULTILOCK)
		return dlock_multilock_new(&t->multilock, t->locks, t->n, NULL);
	return 0;
}

const char *cli_target_open_errmsg(
		const cli_target *t, const cli_config *cfg, char *buf, size_t len)
{
	char shown[512];

	if (t->failed_node == 0)
		return dlock_errmsg_last();
	/* The node as the user gave it (its password masked), and where. */
	snprintf(buf, len, "%s \"%s\": %s", cfg->nodes_from,
			cli_nodes_shown(cfg->nodes[t->failed_node - 1], shown, sizeof(shown)),
			dlock_errmsg_last());
	return buf;
}

void cli_target_close(cli_target *t)
{
	size_t i;

	dlock_semaphore_free(t->sem);
	dlock_redlock_free(t->redlock);
	dlock_multilock_free(t->multilock);
	for (i = 0; t->locks != NULL && i < t->n; i++)
		dlock_lock_free(t->locks[i]);
	for (i = 0; t->clients != NULL && i < t->n; i++)
		dlock_client_free(t->clients[i]);
	free(t->locks);
	free(t->clients);
	memset(t, 0, sizeof(*t));
}

void cli_target_default_owner(const cli_target *t, char owner[DLOCK_OWNER_SIZE])
{
	dlock_client_owner(owner, t->clients[0], (uint64_t)getpid());
}

const char *cli_target_job_owner(const cli_target *t, const char *owner)
{
	return t->sem != NULL ? t->permit_id : owner;
}

const char *cli_target_what(const cli_target *t)
{
	return t->sem != NULL ? "permit of semaphore" : "lock";
}

int cli_target_acquire(cli_target *t, const char *owner, int64_t wait_ms, int64_t lease_ms,
		int64_t *validity_ms, int64_t *token)
{
	*validity_ms = lease_ms;
	if (t->sem != NULL)
		return cli_permit_acquire(t, wait_ms, lease_ms, validity_ms);
	switch (t->mode) {
	case MODE_REDLOCK: {
		int rc = t->fenced ? dlock_redlock_acquire_fenced(
						     token, t->redlock, owner, wait_ms, lease_ms)
				   : dlock_redlock_acquire(t->redlock, owner, wait_ms, lease_ms);

		return rc == 0 ? dlock_redlock_validity_ms(validity_ms, t->redlock, owner) : rc;
	}
	case MODE_MULTILOCK:
		return t->fenced ? dlock_multilock_acquire_fenced(
						   token, t->multilock, owner, wait_ms, lease_ms)
				 : dlock_multilock_acquire(t->multilock, owner, wait_ms, lease_ms);
	default:
		return t->fenced ? dlock_lock_acquire_fenced(
						   token, t->locks[0], owner, wait_ms, lease_ms)
				 : dlock_lock_acquire(t->locks[0], owner, wait_ms, lease_ms);
	}
}

int cli_target_release(cli_target *t, const char *owner)
{
	if (t->sem != NULL)
		return cli_permit_release(t);
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_release(t->redlock, owner);
	case MODE_MULTILOCK:
		return dlock_multilock_release(t->multilock, owner);
	default:
		return dlock_lock_release(t->locks[0], owner);
	}
}

int cli_target_validity(cli_target *t, const char *owner, int64_t *ms)
{
	if (t->sem != NULL)
		return cli_permit_validity(t, ms);
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_validity_ms(ms, t->redlock, owner);
	case MODE_MULTILOCK:
		return dlock_multilock_validity_ms(ms, t->multilock, owner);
	default:
		return dlock_lock_validity_ms(ms, t->locks[0], owner);
	}
}

typedef struct lost_hook {
	void (*fn)(int reason, void *arg);
	void *arg;
} lost_hook;

static lost_hook hook; /* one lock per process: the CLI's own state, not the library's */

/* Every kind's lost callback. */
static void on_lost(const dlock_lost_event *ev, void *userdata)
{
	(void)userdata;
	hook.fn((int)ev->reason, hook.arg);
}

int cli_target_on_lost(cli_target *t, void (*fn)(int reason, void *arg), void *arg)
{
	if (t->sem != NULL)
		return cli_permit_on_lost(t, fn, arg);
	hook.fn = fn;
	hook.arg = arg;
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_set_lost_cb(t->redlock, on_lost, NULL);
	case MODE_MULTILOCK:
		return dlock_multilock_set_lost_cb(t->multilock, on_lost, NULL);
	default:
		return dlock_lock_set_lost_cb(t->locks[0], on_lost, NULL);
	}
}

const char *cli_hint(const char *msg)
{
	static _Thread_local char buf[1024];
	const char *hint = NULL;
	size_t len;

	if (strstr(msg, "NOAUTH") != NULL)
		hint = "the server wants a password: give it with --password-file FILE, "
		       "--password-env VAR or DLOCK_PASSWORD";
	else if (strstr(msg, "WRONGPASS") != NULL)
		hint = "the password (or --user) was refused: check --password-file, "
		       "--password-env, DLOCK_PASSWORD or the URI's";
	if (hint == NULL)
		return msg;
	len = strlen(msg);
	if (len > 0 && msg[len - 1] == '.') /* Redis's "NOAUTH Authentication required." */
		len--;
	snprintf(buf, sizeof(buf), "%.*s; %s", (int)len, msg, hint);
	return buf;
}

static const char *library_errmsg(const cli_target *t)
{
	if (t->err[0] != '\0')
		return t->err;
	if (t->sem != NULL)
		return dlock_semaphore_errmsg(t->sem);
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_errmsg(t->redlock);
	case MODE_MULTILOCK:
		return dlock_multilock_errmsg(t->multilock);
	default:
		return dlock_lock_errmsg(t->locks[0]);
	}
}

const char *cli_target_errmsg(const cli_target *t)
{
	return cli_hint(library_errmsg(t));
}

void cli_target_cancel(cli_target *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		dlock_client_cancel_waits(t->clients[i]);
}

void cli_report_failure(const char *command, const cli_target *t, int rc)
{
	if (t->quiet && rc == DLOCK_ENOTACQUIRED)
		return; /* busy: the exit status says it (cron's -q) */
	if (rc == DLOCK_EWRONGTYPE) /* the message names what the key is (docs/kinds.md) */
		fprintf(stderr, "dlock: %s: %s\n", command, cli_target_errmsg(t));
	else if (t->sem != NULL)
		fprintf(stderr, "dlock: %s: no permit of semaphore \"%s\": %s\n", command, t->name,
				cli_target_errmsg(t));
	else {
		char who[1024] = "";

		/* Read before the look at the nodes, which sets its own. */
		fprintf(stderr, "dlock: %s: lock \"%s\" not acquired: %s", command, t->name,
				cli_target_errmsg(t));
		if (rc == DLOCK_ENOTACQUIRED)
			cli_holder_after_failure(t, who, sizeof(who));
		fprintf(stderr, "%s\n", who);
	}
}

size_t cli_target_quorum(const cli_target *t)
{
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_quorum(t->redlock);
	case MODE_MULTILOCK:
		return dlock_multilock_quorum(t->multilock);
	default:
		return 1;
	}
}

int cli_target_is_locked(cli_target *t, int *locked)
{
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_is_locked(locked, t->redlock);
	case MODE_MULTILOCK:
		return dlock_multilock_is_locked(locked, t->multilock);
	default:
		return dlock_lock_is_locked(locked, t->locks[0]);
	}
}

int cli_exit_for(int rc, const cli_config *cfg)
{
	switch (rc) {
	case 0:
		return 0;
	case DLOCK_ENOTACQUIRED:
		return cfg->conflict_exit;
	case DLOCK_EINVAL:
	case DLOCK_EDUPLICATE: /* one server listed twice: a usage error */
		return EXIT_USAGE;
	case DLOCK_ENOTOWNER:
		return EXIT_NOT_OWNER;
	case DLOCK_ELOST:
		return EXIT_LOST;
	case DLOCK_EWRONGTYPE:
		return EXIT_WRONGTYPE;
	default:
		/* No quorum, unreachable, timed out, refused, expired while acquiring. */
		return EXIT_UNAVAILABLE;
	}
}
