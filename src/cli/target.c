/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	lopts.kind = cfg->fenced ? DLOCK_LOCK_FENCED
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
	copts.watch_force_unlock = cfg->watch_force_unlock;
	copts.tls_ca_file = cfg->tls_ca;
	copts.tls_ca_dir = cfg->tls_ca_dir;
	copts.tls_cert_file = cfg->tls_cert;
	copts.tls_key_file = cfg->tls_key;
	copts.tls_server_name = cfg->tls_server_name;
	copts.tls_insecure = cfg->tls_insecure;
	copts.sentinel_user = cfg->sentinel_user;
	copts.sentinel_password = cfg->sentinel_password;
	t->clients = calloc(t->n, sizeof(*t->clients));
	t->locks = calloc(t->n, sizeof(*t->locks));
	if (t->clients == NULL || t->locks == NULL)
		return DLOCK_ENOMEM;
	for (i = 0; i < t->n; i++) {
		rc = dlock_client_open(&t->clients[i], cfg->nodes[i], &copts);
		if (rc < 0)
			return rc;
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
		return dlock_multilock_new(&t->multilock, t->locks, t->n);
	return 0;
}

void cli_target_close(cli_target *t)
{
	size_t i;

	dlock_redlock_free(t->redlock);
	dlock_multilock_free(t->multilock);
	for (i = 0; t->locks != NULL && i < t->n; i++)
		dlock_lock_free(t->locks[i]);
	for (i = 0; t->clients != NULL && i < t->n; i++)
		dlock_client_close(t->clients[i]);
	free(t->locks);
	free(t->clients);
	memset(t, 0, sizeof(*t));
}

void cli_target_default_owner(const cli_target *t, char *buf, size_t len)
{
	dlock_client_owner(buf, len, t->clients[0], (uint64_t)getpid());
}

int cli_target_acquire(cli_target *t, const char *owner, int64_t wait_ms, int64_t lease_ms,
		int64_t *validity_ms, int64_t *token)
{
	*validity_ms = lease_ms;
	switch (t->mode) {
	case MODE_REDLOCK:
		return t->fenced ? dlock_redlock_try_fenced(validity_ms, token, t->redlock, owner,
						   wait_ms, lease_ms)
				 : dlock_redlock_try_as(validity_ms, t->redlock, owner, wait_ms,
						   lease_ms);
	case MODE_MULTILOCK:
		return t->fenced ? dlock_multilock_try_fenced(
						   token, t->multilock, owner, wait_ms, lease_ms)
				 : dlock_multilock_try_as(t->multilock, owner, wait_ms, lease_ms);
	default:
		return t->fenced ? dlock_lock_try_fenced(
						   token, t->locks[0], owner, wait_ms, lease_ms)
				 : dlock_lock_try_as(t->locks[0], owner, wait_ms, lease_ms);
	}
}

int cli_target_release(cli_target *t, const char *owner)
{
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_unlock_as(t->redlock, owner);
	case MODE_MULTILOCK:
		return dlock_multilock_unlock_as(t->multilock, owner);
	default:
		return dlock_lock_unlock_as(t->locks[0], owner);
	}
}

int cli_target_validity(cli_target *t, const char *owner, int64_t *ms)
{
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_validity(ms, t->redlock, owner);
	case MODE_MULTILOCK:
		return dlock_multilock_validity(ms, t->multilock, owner);
	default:
		return dlock_lock_validity(ms, t->locks[0], owner);
	}
}

typedef struct lost_hook {
	void (*fn)(int reason, void *arg);
	void *arg;
} lost_hook;

static lost_hook hook; /* one lock per process: the CLI's own state, not the library's */

static void on_lock_lost(dlock_lock *l, const char *owner, int reason, void *ud)
{
	(void)l, (void)owner, (void)ud;
	hook.fn(reason, hook.arg);
}

static void on_redlock_lost(dlock_redlock *r, const char *owner, int reason, void *ud)
{
	(void)r, (void)owner, (void)ud;
	hook.fn(reason, hook.arg);
}

static void on_multilock_lost(dlock_multilock *m, const char *owner, int reason, void *ud)
{
	(void)m, (void)owner, (void)ud;
	hook.fn(reason, hook.arg);
}

int cli_target_on_lost(cli_target *t, void (*fn)(int reason, void *arg), void *arg)
{
	hook.fn = fn;
	hook.arg = arg;
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_set_lost_cb(t->redlock, on_redlock_lost, NULL);
	case MODE_MULTILOCK:
		return dlock_multilock_set_lost_cb(t->multilock, on_multilock_lost, NULL);
	default:
		return dlock_lock_set_lost_cb(t->locks[0], on_lock_lost, NULL);
	}
}

const char *cli_target_errmsg(const cli_target *t)
{
	switch (t->mode) {
	case MODE_REDLOCK:
		return dlock_redlock_errmsg(t->redlock);
	case MODE_MULTILOCK:
		return dlock_multilock_errmsg(t->multilock);
	default:
		return dlock_lock_errmsg(t->locks[0]);
	}
}

void cli_target_cancel(cli_target *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		dlock_client_cancel_waits(t->clients[i]);
}

void cli_report_failure(const char *command, const cli_target *t, int rc)
{
	if (rc == DLOCK_EWRONGTYPE)
		fprintf(stderr,
				"dlock: %s: \"%s\" holds a value that is not a Redisson/dlock lock "
				"(another lock library?): %s\n",
				command, t->name, cli_target_errmsg(t));
	else
		fprintf(stderr, "dlock: %s: lock \"%s\" not acquired: %s\n", command, t->name,
				cli_target_errmsg(t));
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

/* ------------------------------------------------------------------ */
/* status and unlock --force                                            */

typedef struct node_view {
	int reachable;
	int rc; /* the query's error, or 0 */
	char error[512];
	dlock_lock_info *info; /* NULL when the query failed */
} node_view;

static void view_node(cli_target *t, size_t i, node_view *v)
{
	memset(v, 0, sizeof(*v));
	v->rc = dlock_lock_query(&v->info, t->locks[i]);
	/* A server that answered with an error is reachable; one that did not is not. */
	v->reachable = v->rc == 0 ||
			(v->rc != DLOCK_ECONN && v->rc != DLOCK_ETIMEDOUT && v->rc != DLOCK_EAUTH);
	if (v->rc < 0)
		snprintf(v->error, sizeof(v->error), "%s", dlock_lock_errmsg(t->locks[i]));
}

static void json_string(FILE *out, const char *s, size_t len)
{
	size_t i;

	fputc('"', out);
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(out, "\\u%04x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

static const char *mode_name(cli_mode m)
{
	return m == MODE_REDLOCK ? "redlock" : m == MODE_MULTILOCK ? "multilock" : "rlock";
}

/* What every node showed, summed up. */
typedef struct status_counts {
	size_t reachable, held, refused, wrongtype;
} status_counts;

static void print_json_node(FILE *out, const char *node, const node_view *v)
{
	size_t j;

	fprintf(out, "{\"node\":");
	json_string(out, node, strlen(node));
	fprintf(out, ",\"reachable\":%s", v->reachable ? "true" : "false");
	if (v->info == NULL) {
		fprintf(out, ",\"error\":");
		json_string(out, v->error, strlen(v->error));
		fprintf(out, "}");
		return;
	}
	fprintf(out, ",\"ttl_ms\":%lld,\"holders\":[", (long long)dlock_lock_info_ttl_ms(v->info));
	for (j = 0; j < dlock_lock_info_holders(v->info); j++) {
		const char *owner = dlock_lock_info_owner(v->info, j);

		fprintf(out, "%s{\"owner\":", j ? "," : "");
		json_string(out, owner, strlen(owner));
		fprintf(out, ",\"count\":%lld}", (long long)dlock_lock_info_count(v->info, j));
	}
	fprintf(out, "]}");
}

static void print_json(const cli_target *t, const node_view *v, const status_counts *c, FILE *out)
{
	size_t i;

	fprintf(out, "{\"name\":");
	json_string(out, t->name, strlen(t->name));
	fprintf(out, ",\"mode\":\"%s\",\"quorum\":%zu,\"held_on\":%zu,\"nodes\":[",
			mode_name(t->mode), cli_target_quorum(t), c->held);
	for (i = 0; i < t->n; i++) {
		fputs(i ? "," : "", out);
		print_json_node(out, dlock_client_node(t->clients[i]), &v[i]);
	}
	fprintf(out, "]}\n");
}

static void print_table_node(FILE *out, int width, const char *node, const node_view *v)
{
	size_t j;

	if (v->info == NULL) {
		fprintf(out, "%-*s %-12s %s\n", width, node, v->reachable ? "error" : "unreachable",
				v->error);
		return;
	}
	if (dlock_lock_info_holders(v->info) == 0)
		fprintf(out, "%-*s %-12s %-8s %-6s %s\n", width, node, "free", "-", "-", "-");
	for (j = 0; j < dlock_lock_info_holders(v->info); j++)
		fprintf(out, "%-*s %-12s %-8lld %-6lld %s\n", width, j ? "" : node,
				j ? "" : "held", (long long)dlock_lock_info_ttl_ms(v->info),
				(long long)dlock_lock_info_count(v->info, j),
				dlock_lock_info_owner(v->info, j));
}

/* The NODE column is as wide as its longest name (a unix: path can be long). */
static int node_width(const cli_target *t)
{
	size_t i, w = 24;

	for (i = 0; i < t->n; i++) {
		size_t len = strlen(dlock_client_node(t->clients[i]));

		w = len > w ? len : w;
	}
	return w > 200 ? 200 : (int)w;
}

static void print_table(const cli_target *t, const node_view *v, const status_counts *c, FILE *out)
{
	int width = node_width(t);
	size_t i;

	fprintf(out, "lock \"%s\" (%s, %zu node%s, quorum %zu): held on %zu, reachable %zu\n",
			t->name, mode_name(t->mode), t->n, t->n == 1 ? "" : "s",
			cli_target_quorum(t), c->held, c->reachable);
	fprintf(out, "%-*s %-12s %-8s %-6s %s\n", width, "NODE", "STATE", "TTL_MS", "COUNT",
			"OWNER");
	for (i = 0; i < t->n; i++)
		print_table_node(out, width, dlock_client_node(t->clients[i]), &v[i]);
}

/* A node that answered with an error is a failure; one that is down is
 * not, while a quorum can still be seen. */
static int status_exit(const cli_target *t, const status_counts *c)
{
	if (c->wrongtype > 0) {
		fprintf(stderr,
				"dlock: status: \"%s\" holds a value that is not a Redisson/dlock lock "
				"(another lock library?) on %zu node%s\n",
				t->name, c->wrongtype, c->wrongtype == 1 ? "" : "s");
		return EXIT_WRONGTYPE;
	}
	return c->refused > 0 || c->reachable < cli_target_quorum(t) ? EXIT_UNAVAILABLE : 0;
}

/* Nodes read one by one (status, unlock --force) bypass the quorum's own
 * check: two of them answering with one run_id are one server listed
 * twice. 0, or EXIT_USAGE with one line. */
static int refuse_one_server_twice(cli_target *t, const char *command)
{
	int rc = 0;

	if (t->mode == MODE_REDLOCK)
		rc = dlock_redlock_check_servers(t->redlock);
	else if (t->mode == MODE_MULTILOCK)
		rc = dlock_multilock_check_servers(t->multilock);
	if (rc == 0)
		return 0;
	fprintf(stderr, "dlock: %s: %s\n", command, cli_target_errmsg(t));
	return EXIT_USAGE;
}

int cli_target_status(cli_target *t, int json, FILE *out)
{
	node_view *v = calloc(t->n, sizeof(*v));
	status_counts c = { 0, 0, 0, 0 };
	size_t i;
	int status;

	if (v == NULL)
		return EXIT_UNAVAILABLE;
	for (i = 0; i < t->n; i++) {
		view_node(t, i, &v[i]);
		c.reachable += v[i].reachable;
		c.refused += v[i].reachable && v[i].rc < 0;
		c.wrongtype += v[i].rc == DLOCK_EWRONGTYPE;
		c.held += dlock_lock_info_holders(v[i].info) > 0;
	}
	status = refuse_one_server_twice(t, "status");
	if (status == 0 && json)
		print_json(t, v, &c, out);
	else if (status == 0)
		print_table(t, v, &c, out);
	for (i = 0; i < t->n; i++)
		dlock_lock_info_free(v[i].info);
	free(v);
	return status != 0 ? status : status_exit(t, &c);
}

int cli_target_force(cli_target *t, FILE *out)
{
	size_t i, ok = 0, deleted = 0;
	int *pinged = calloc(t->n, sizeof(*pinged)), status;

	if (pinged == NULL)
		return EXIT_UNAVAILABLE;
	/* Every node connected first, so that one server listed twice is
	 * refused before anything is deleted; a node that did not answer is
	 * not asked again (it would cost its timeout twice). */
	for (i = 0; i < t->n; i++)
		pinged[i] = dlock_client_ping(t->clients[i]);
	if ((status = refuse_one_server_twice(t, "unlock --force")) != 0) {
		free(pinged);
		return status;
	}
	for (i = 0; i < t->n; i++) {
		int d = 0, rc;

		if (pinged[i] == DLOCK_ECONN || pinged[i] == DLOCK_ETIMEDOUT) {
			fprintf(stderr, "dlock: unlock --force: %s\n",
					dlock_client_errmsg(t->clients[i]));
			continue;
		}
		rc = dlock_lock_force_unlock(&d, t->locks[i]);
		if (rc < 0) {
			fprintf(stderr, "dlock: unlock --force: %s\n",
					dlock_lock_errmsg(t->locks[i]));
			continue;
		}
		ok++;
		deleted += d != 0;
	}
	free(pinged);
	fprintf(out, "deleted \"%s\" on %zu of %zu node%s\n", t->name, deleted, t->n,
			t->n == 1 ? "" : "s");
	return ok >= cli_target_quorum(t) ? 0 : EXIT_UNAVAILABLE;
}
