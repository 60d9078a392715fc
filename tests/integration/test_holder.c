/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Who holds it (dlock_client_options.label, dlock_client_holder) on a real
 * redis-server: a labelled client registers itself as
 * `dlock:holder:<uuid>` with its first acquisition (no write of its own per
 * acquisition), keeps it alive while it holds something (watchdog and
 * fixed-lease holds), lets it expire after, deletes it when freed; an
 * unlabelled client sends nothing extra; a registration refused by an ACL
 * costs the acquisition nothing; on a cluster the key lives at its slot.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

#define srv dl_srv

TestSuite(holder, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* ---- helpers ------------------------------------------------------------- */

static dlock_client *labelled(rh_server *s, const char *label, const char *command,
		int64_t watchdog_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.label = label;
	o.command = command;
	if (watchdog_ms > 0)
		o.watchdog_timeout_ms = watchdog_ms;
	return dl_client_opts(rh_server_uri(s), &o);
}

static void holder_key(char *buf, size_t len, dlock_client *c)
{
	snprintf(buf, len, "dlock:holder:%s", dlock_client_id(c));
}

/* How many SET commands the server ran so far (INFO commandstats). */
static long set_calls(rh_server *s)
{
	redisReply *r = rh_command(s, "INFO commandstats");
	const char *p;
	long n = 0;

	cr_assert_not_null(r);
	if ((p = strstr(r->str, "cmdstat_set:calls=")) != NULL)
		n = strtol(p + strlen("cmdstat_set:calls="), NULL, 10);
	freeReplyObject(r);
	return n;
}

/* The registration's value, as stored ("" when absent). */
static void value_of(char *buf, size_t len, rh_server *s, const char *key)
{
	redisReply *r = rh_command(s, "GET %s", key);

	cr_assert_not_null(r);
	snprintf(buf, len, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
	freeReplyObject(r);
}

/* dlock_client_holder(), which must not fail (0): registered 1 or 0. */
static int holder_of(dlock_holder *h, dlock_client *c, const char *owner)
{
	int rc = dlock_client_holder(h, c, owner);

	cr_assert_eq(rc, 0, "dlock_client_holder: %d (%s)", rc, dlock_errmsg_last());
	return h->registered;
}

static long holder_keys(rh_server *s)
{
	redisReply *r = rh_command(s, "KEYS dlock:holder:*");
	long n;

	cr_assert_not_null(r);
	n = (long)r->elements;
	freeReplyObject(r);
	return n;
}

/* ---- what it writes and reads -------------------------------------------- */

Test(holder, an_acquisition_registers_host_pid_label_command_and_since)
{
	dlock_client *c = labelled(srv, "nightly\nbuild", "./nightly.sh --all", 0);
	dlock_lock *l = dl_lock(c, "reg-basic");
	char key[128], value[1024], owner[128], host[256] = "", line[512];
	int64_t before = 0, pttl;
	dlock_holder h = DLOCK_HOLDER_INIT;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	before = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	gethostname(host, sizeof host - 1);
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	holder_key(key, sizeof key, c);
	value_of(value, sizeof value, srv, key);
	snprintf(line, sizeof line, "host=%s\npid=%d\nlabel=nightly build\ncmd=./nightly.sh --all\nsince=",
			host, (int)getpid());
	cr_assert(strncmp(value, line, strlen(line)) == 0,
			"registration is '%s', not starting with '%s'", value, line);
	pttl = rh_command_int(srv, "PTTL %s", key);
	cr_assert(pttl > 0 && pttl <= 30000, "TTL %lld ms, not within the watchdog", (long long)pttl);

	dl_owner(c, owner, sizeof owner);
	cr_assert_eq(holder_of(&h, c, owner), 1);
	cr_assert_eq(h.registered, 1);
	cr_assert_eq(h.version, DLOCK_HOLDER_VERSION, "the caller's version is kept");
	cr_assert_str_eq(h.host, host);
	cr_assert_eq(h.pid, (int64_t)getpid());
	cr_assert_str_eq(h.label, "nightly build", "a line break in a label is a space");
	cr_assert_str_eq(h.command, "./nightly.sh --all");
	cr_assert(h.since_ms >= before && h.since_ms <= before + 5000, "since %lld, started %lld",
			(long long)h.since_ms, (long long)before);
	dl_pass(dlock_lock_release(l, NULL));
	dl_free_locks(l);
	dl_close_clients(c);
}

Test(holder, a_write_lock_owner_names_its_registered_client)
{
	dlock_client *c = labelled(srv, "rw", NULL, 0);
	dlock_lock *w = NULL;
	char owner[128], field[160];
	dlock_holder h = DLOCK_HOLDER_INIT;

	dl_pass(dlock_lock_new(&w, c, "reg-rw", dl_kind(DLOCK_LOCK_WRITE)));
	dl_pass(dlock_lock_acquire(w, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_owner(c, owner, sizeof owner);
	snprintf(field, sizeof field, "%s:write", owner);
	cr_assert_eq(rh_command_int(srv, "HEXISTS reg-rw %s", field), 1);
	cr_assert_eq(holder_of(&h, c, field), 1);
	cr_assert_str_eq(h.label, "rw");
	cr_assert_str_eq(h.command, "", "no command given: empty");
	dl_pass(dlock_lock_release(w, NULL));
	dl_free_locks(w);
	dl_close_clients(c);
}

Test(holder, a_long_label_and_command_keep_200_bytes)
{
	char label[301], command[401], owner[128];
	dlock_client *c;
	dlock_lock *l;
	dlock_holder h = DLOCK_HOLDER_INIT;

	memset(label, 'a', 300);
	label[300] = '\0';
	memset(command, 'c', 400);
	command[400] = '\0';
	c = labelled(srv, label, command, 0);
	label[0] = 'X'; /* copied at open: the caller's buffer is its own again */
	l = dl_lock(c, "reg-long");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_owner(c, owner, sizeof owner);
	cr_assert_eq(holder_of(&h, c, owner), 1);
	cr_assert_eq(strlen(h.label), 200);
	cr_assert_eq(h.label[0], 'a');
	cr_assert_eq(strlen(h.command), 200);
	dl_pass(dlock_lock_release(l, NULL));
	dl_free_locks(l);
	dl_close_clients(c);
}

Test(holder, owners_without_a_registration_are_zero)
{
	dlock_client *c = labelled(srv, "q", NULL, 0);
	const char *bad[] = { "nope", "x:1", "11111111-2222-3333-4444-555555555555",
		"11111111-2222-3333-4444-555555555555:", "11111111-2222-3333-4444-555555555555:7x",
		"1111111-22222-3333-4444-555555555555:7", "" };
	dlock_holder h = DLOCK_HOLDER_INIT;
	size_t i;

	strcpy(h.host, "stale");
	h.registered = 1;
	cr_assert_eq(holder_of(&h, c, DL_REDISSON_OWNER), 0, "a Redisson holder");
	cr_assert_eq(h.registered, 0, "not registered, and the struct says so");
	cr_assert_str_eq(h.host, "", "nothing left from before");
	cr_assert_eq(holder_of(&h, c, "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:1:write"), 0);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(holder_of(&h, c, bad[i]), 0, "malformed owner '%s'", bad[i]);
	cr_assert_eq(dlock_client_holder(NULL, c, "x"), DLOCK_EINVAL);
	cr_assert_eq(dlock_client_holder(&h, NULL, "x"), DLOCK_EINVAL);
	cr_assert_eq(dlock_client_holder(&h, c, NULL), DLOCK_EINVAL);
	dl_close_clients(c);
}

Test(holder, the_caller_struct_needs_a_known_version)
{
	dlock_client *c = labelled(srv, "v", NULL, 0);
	dlock_holder h;

	memset(&h, 0x5a, sizeof h);
	cr_assert_eq(dlock_holder_init(&h, DLOCK_HOLDER_VERSION), 0);
	cr_assert_eq(h.version, DLOCK_HOLDER_VERSION);
	cr_assert_eq(h.registered, 0);
	cr_assert_str_eq(h.host, "");
	cr_assert_str_eq(h.label, "");
	cr_assert_str_eq(h.command, "");
	cr_assert_eq(h.pid, 0);
	cr_assert_eq(h.since_ms, 0);
	cr_assert_eq(dlock_holder_init(&h, DLOCK_HOLDER_VERSION + 1), DLOCK_EINVAL);
	cr_assert_eq(dlock_holder_init(NULL, DLOCK_HOLDER_VERSION), DLOCK_EINVAL);
	h.version = 0;
	cr_assert_eq(dlock_client_holder(&h, c, DL_REDISSON_OWNER), DLOCK_EINVAL,
			"a struct without its version is not written");
	cr_assert_neq(strstr(dlock_errmsg_last(), "DLOCK_HOLDER_INIT"), NULL, "%s",
			dlock_errmsg_last());
	dl_close_clients(c);
}

/* ---- what it costs ------------------------------------------------------- */

Test(holder, without_a_label_nothing_is_registered_or_sent)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *l = dl_lock(c, "reg-none");
	long sets = set_calls(srv);
	char owner[128];
	dlock_holder h = DLOCK_HOLDER_INIT;

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	cr_assert_eq(set_calls(srv), sets, "an unlabelled acquisition sent %ld SET",
			set_calls(srv) - sets);
	cr_assert_eq(holder_keys(srv), 0);
	dl_owner(c, owner, sizeof owner);
	cr_assert_eq(holder_of(&h, c, owner), 0);
	dl_pass(dlock_lock_release(l, NULL));
	cr_assert_eq(holder_keys(srv), 0);
	dl_free_locks(l);
	dl_close_clients(c);
}

Test(holder, fifty_acquisitions_write_the_registration_once)
{
	dlock_client *plain = dl_client(rh_server_uri(srv), 0, 0);
	dlock_client *c = labelled(srv, "busy", NULL, 0);
	dlock_lock *p = dl_lock(plain, "reg-fifty"), *l = dl_lock(c, "reg-fifty");
	long sets = set_calls(srv), without, with;
	int i;

	/* What 50 pairs cost without a label (no SET: a release writes no latch), then with. */
	for (i = 0; i < 50; i++) {
		dl_pass(dlock_lock_acquire(p, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		dl_pass(dlock_lock_release(p, NULL));
	}
	without = set_calls(srv) - sets;
	sets = set_calls(srv);
	for (i = 0; i < 50; i++) {
		dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		dl_pass(dlock_lock_release(l, NULL));
	}
	with = set_calls(srv) - sets;
	cr_assert_eq(with - without, 1, "50 lock/unlock pairs wrote %ld registrations",
			with - without);
	dl_free_locks(p, l);
	dl_close_clients(plain, c);
}

/* ---- how long it lives --------------------------------------------------- */

Test(holder, a_watchdog_hold_keeps_it_alive_and_it_expires_after_release)
{
	dlock_client *c = labelled(srv, "long", NULL, 600);
	dlock_lock *l = dl_lock(c, "reg-alive");
	char key[128];
	int64_t pttl;

	holder_key(key, sizeof key, c);
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(1800); /* three watchdog timeouts */
	pttl = rh_command_int(srv, "PTTL %s", key);
	cr_assert(pttl > 0 && pttl <= 600, "after 3 watchdog timeouts held: PTTL %lld", (long long)pttl);
	dl_pass(dlock_lock_release(l, NULL));
	dl_sleep_ms(900);
	cr_assert_eq(rh_command_int(srv, "EXISTS %s", key), 0, "still there 900 ms after release");
	dl_free_locks(l);
	dl_close_clients(c);
}

Test(holder, a_fixed_lease_longer_than_the_watchdog_keeps_it_alive)
{
	dlock_client *c = labelled(srv, "leased", NULL, 600);
	dlock_lock *l = dl_lock(c, "reg-leased");
	char key[128];
	int64_t pttl;

	holder_key(key, sizeof key, c);
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 3000));
	dl_sleep_ms(1800);
	pttl = rh_command_int(srv, "PTTL %s", key);
	cr_assert(pttl > 0, "a 3 s lease held for 1.8 s: PTTL %lld", (long long)pttl);
	dl_pass(dlock_lock_release(l, NULL));
	dl_free_locks(l);
	dl_close_clients(c);
}

Test(holder, a_freed_client_deletes_it)
{
	dlock_client *c = labelled(srv, "bye", NULL, 0);
	dlock_lock *l = dl_lock(c, "reg-free");
	char key[128];

	holder_key(key, sizeof key, c);
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	cr_assert_eq(rh_command_int(srv, "EXISTS %s", key), 1);
	dl_pass(dlock_lock_release(l, NULL));
	dl_free_locks(l);
	dl_close_clients(c);
	cr_assert_eq(rh_command_int(srv, "EXISTS %s", key), 0, "left behind by a freed client");
}

Test(holder, a_forked_child_freeing_its_copy_leaves_it_alone)
{
	dlock_client *c = labelled(srv, "parent", NULL, 0);
	dlock_lock *l = dl_lock(c, "reg-fork");
	char key[128];
	int status = -1;
	pid_t kid;

	holder_key(key, sizeof key, c);
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	kid = fork();
	cr_assert_neq(kid, -1);
	if (kid == 0) {
		dlock_lock_free(l);
		dlock_client_free(c);
		_exit(0);
	}
	cr_assert_eq(waitpid(kid, &status, 0), kid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	cr_assert_eq(rh_command_int(srv, "EXISTS %s", key), 1, "a forked child deleted it");
	dl_pass(dlock_lock_release(l, NULL));
	dl_free_locks(l);
	dl_close_clients(c);
	cr_assert_eq(rh_command_int(srv, "EXISTS %s", key), 0);
}

/* ---- every kind, every member -------------------------------------------- */

Test(holder, permits_and_multilock_members_register_on_their_nodes)
{
	rh_server *other = rh_server_start(NULL);
	dlock_client *a = labelled(srv, "m", NULL, 0), *b, *p;
	dlock_lock *la, *lb;
	dlock_multilock *ml = NULL;
	dlock_semaphore *sem = NULL;
	dlock_semaphore_options so = DLOCK_SEMAPHORE_OPTIONS_INIT;
	char id[DLOCK_PERMIT_ID_SIZE], key[128];

	cr_assert_not_null(other);
	b = labelled(other, "m", NULL, 0);
	la = dl_lock(a, "reg-ml");
	lb = dl_lock(b, "reg-ml");
	dl_pass(dlock_multilock_new(&ml, (dlock_lock *const[]){ la, lb }, 2, NULL));
	dl_pass(dlock_multilock_acquire(ml, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	holder_key(key, sizeof key, a);
	cr_assert_eq(rh_command_int(srv, "EXISTS %s", key), 1, "member a");
	holder_key(key, sizeof key, b);
	cr_assert_eq(rh_command_int(other, "EXISTS %s", key), 1, "member b");
	dl_pass(dlock_multilock_release(ml, NULL));
	dlock_multilock_free(ml);

	/* A client of its own for the permit: a registration of its own. */
	p = labelled(other, "p", NULL, 0);
	so.kind = DLOCK_SEMAPHORE_EXPIRABLE;
	dl_pass(dlock_semaphore_new(&sem, p, "reg-sem", &so));
	dl_pass(dlock_semaphore_try_set_permits(NULL, sem, 2));
	dl_pass(dlock_semaphore_acquire_permit(id, sem, 0, DLOCK_LEASE_WATCHDOG));
	holder_key(key, sizeof key, p);
	cr_assert_eq(rh_command_int(other, "EXISTS %s", key), 1, "permit holder");
	dl_pass(dlock_semaphore_release_permit(sem, id));
	dlock_semaphore_free(sem);
	dl_free_locks(la, lb);
	dl_close_clients(a, b, p);
	rh_server_free(other);
}

/* ---- refusals ------------------------------------------------------------ */

Test(holder, an_acl_refusing_the_registration_costs_the_acquisition_nothing)
{
	char uri[128], owner[128];
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c;
	dlock_lock *l;
	dlock_holder h = DLOCK_HOLDER_INIT;
	int i;

	{
		redisReply *r = rh_command(srv, "ACL SETUSER app on >pw ~acl-* ~redisson* &* +@all");

		cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "ACL SETUSER refused");
		freeReplyObject(r);
	}
	snprintf(uri, sizeof uri, "redis://app:pw@127.0.0.1:%d", rh_server_port(srv));
	o.label = "refused";
	c = dl_client_opts(uri, &o);
	l = dl_lock(c, "acl-lock");
	for (i = 0; i < 3; i++) {
		int64_t t0 = rh_now_ms();

		dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
		cr_assert_lt(rh_now_ms() - t0, 500, "an acquisition took %lld ms",
				(long long)(rh_now_ms() - t0));
		dl_pass(dlock_lock_release(l, NULL));
	}
	cr_assert_eq(holder_keys(srv), 0);
	dl_owner(c, owner, sizeof owner);
	/* Reading it is refused too: the server's error, as documented. */
	cr_assert_lt(dlock_client_holder(&h, c, owner), 0);
	dl_free_locks(l);
	dl_close_clients(c);
}

/* ---- a cluster ----------------------------------------------------------- */

Test(holder, on_a_cluster_it_is_read_where_its_slot_is, .init = NULL, .fini = NULL,
		.timeout = 120)
{
	rh_cluster *cl = rh_cluster_start(3, 0, NULL);
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c;
	dlock_lock *l[3];
	char owner[128], name[16];
	int i, got = 0;
	dlock_holder h = DLOCK_HOLDER_INIT;

	cr_assert_not_null(cl, "could not start a cluster");
	o.label = "clustered";
	c = dl_client_opts(rh_cluster_seed_uri(cl), &o);
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof name, "res-%d", i);
		l[i] = dl_lock(c, name);
		dl_pass(dlock_lock_acquire(l[i], NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	}
	dl_owner(c, owner, sizeof owner);
	/* Its node may not be a lock's: the background thread writes it there. */
	for (i = 0; i < 100 && got == 0; i++) {
		got = holder_of(&h, c, owner);
		if (got == 0)
			dl_sleep_ms(10);
	}
	cr_assert_eq(got, 1, "no registration on the cluster");
	cr_assert_str_eq(h.label, "clustered");
	for (i = 0; i < 3; i++)
		dl_pass(dlock_lock_release(l[i], NULL));
	dl_free_locks(l[0], l[1], l[2]);
	dl_close_clients(c);
	rh_cluster_free(cl);
}
