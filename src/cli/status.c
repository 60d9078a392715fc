/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock status` and `dlock unlock --force`: what each node has under a
 * name, and breaking a lock.
 *
 * The kind is read from the key: a HASH is a lock (RLock, fair or fenced
 * lock) or, with a `mode` field, a read-write lock; a STRING holding a
 * number is a semaphore's free permits or a latch's count. An expirable
 * semaphore's taken permits (the ZSET `{NAME}:timeout`) tell it apart, and
 * so do waiters listening on one kind's channel and not the other's;
 * without either the count is shown as what it may be, never guessed. A
 * plain lock's output stays as it always was: scripts parse it.
 */
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* A count without taken permits: whose waiters listen tells a semaphore
 * from a latch; waiters of both, or none, tell nothing - nor does a failed
 * look at the latch's (the count is still shown, as what it may be). */
static void tell_count(cli_target *t, size_t i, node_view *v)
{
	dlock_countdown *latch = NULL;
	int64_t sem_waiters = dlock_semaphore_info_subscribers(v->sem);

	v->kind = KIND_COUNT;
	/* A name a cluster's latch cannot have is no latch's. */
	if (dlock_countdown_new(&latch, t->clients[i], t->name, NULL) == 0 &&
			dlock_countdown_subscribers(&v->latch_waiters, latch) == 0) {
		if (v->latch_waiters > 0 && sem_waiters == 0)
			v->kind = KIND_LATCH;
		else if (sem_waiters > 0 && v->latch_waiters == 0)
			v->kind = KIND_SEMAPHORE;
	}
	dlock_countdown_free(latch);
}

/* A key that is not a hash: a semaphore's or a latch's count? 0 when it
 * is one (v->sem set), else the query's error (v->error set). */
static int view_count(cli_target *t, size_t i, node_view *v)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;
	int rc;

	o.kind = DLOCK_SEMAPHORE_EXPIRABLE; /* reads the taken permits too */
	if ((rc = dlock_semaphore_new(&s, t->clients[i], t->name, &o)) < 0)
		return rc;
	rc = dlock_semaphore_query(&v->sem, s);
	if (rc < 0 && rc != DLOCK_EWRONGTYPE)
		snprintf(v->error, sizeof(v->error), "%s", cli_hint(dlock_semaphore_errmsg(s)));
	else if (rc == 0 && dlock_semaphore_info_permits(v->sem) > 0)
		v->kind = KIND_PERMITS;
	else if (rc == 0)
		tell_count(t, i, v);
	dlock_semaphore_free(s);
	return rc;
}

static void view_node(cli_target *t, size_t i, node_view *v)
{
	memset(v, 0, sizeof(*v));
	v->rc = dlock_lock_query(&v->info, t->locks[i]);
	if (v->rc < 0)
		snprintf(v->error, sizeof(v->error), "%s",
				cli_hint(dlock_lock_errmsg(t->locks[i])));
	if (v->rc == DLOCK_EWRONGTYPE) {
		int rc = view_count(t, i, v);

		if (rc != DLOCK_EWRONGTYPE)
			v->rc = rc; /* a count, or the error reading it */
	} else if (v->rc == 0 && dlock_lock_info_rw_mode(v->info) != NULL) {
		v->kind = KIND_RWLOCK;
	}
	/* A server that answered with an error is reachable; one that did not,
	 * refused dlock's credentials or is not a Redis server is not usable. */
	v->reachable = v->rc == 0 || (v->rc != DLOCK_ECONN && v->rc != DLOCK_ETIMEDOUT &&
						     v->rc != DLOCK_EAUTH && v->rc != DLOCK_EPROTO);
}

/* Held: a lock's holders, or an expirable semaphore's taken permits. */
static int view_held(const node_view *v)
{
	return dlock_lock_info_holders(v->info) > 0 || dlock_semaphore_info_permits(v->sem) > 0;
}

/* What the name is, from the first node that has something under it. */
static node_kind name_kind(const cli_target *t, const node_view *v)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (v[i].rc == 0 && (v[i].kind != KIND_LOCK || view_held(&v[i])))
			return v[i].kind;
	return KIND_LOCK;
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

static const char *kind_name(node_kind k)
{
	return k == KIND_RWLOCK				? "rwlock"
	       : k == KIND_PERMITS || k == KIND_SEMAPHORE ? "semaphore"
	       : k == KIND_LATCH			? "latch"
	       : k == KIND_COUNT			? "count"
							: "lock";
}

static const char *mode_name(cli_mode m)
{
	return m == MODE_REDLOCK ? "redlock" : m == MODE_MULTILOCK ? "multilock" : "rlock";
}

/* A semaphore's or a latch's count, after "node" and "reachable". */
static void print_json_count(FILE *out, const node_view *v)
{
	int64_t free_n = dlock_semaphore_info_available(v->sem);
	int64_t waiters = dlock_semaphore_info_subscribers(v->sem);
	size_t j, used = dlock_semaphore_info_permits(v->sem);

	if (v->kind == KIND_COUNT) {
		fprintf(out,
				",\"kind\":\"count\",\"count\":%lld,"
				"\"could_be\":[\"semaphore\",\"latch\"]}",
				(long long)free_n);
		return;
	}
	if (v->kind == KIND_LATCH) {
		fprintf(out, ",\"kind\":\"latch\",\"count\":%lld,\"waiters\":%lld}",
				(long long)free_n, (long long)v->latch_waiters);
		return;
	}
	if (v->kind == KIND_SEMAPHORE) {
		fprintf(out, ",\"kind\":\"semaphore\",\"free\":%lld,\"waiters\":%lld}",
				(long long)free_n, (long long)waiters);
		return;
	}
	fprintf(out,
			",\"kind\":\"semaphore\",\"expirable\":true,\"used\":%zu,\"free\":%lld,"
			"\"waiters\":%lld,\"permits\":[",
			used, (long long)free_n, (long long)waiters);
	for (j = 0; j < used; j++)
		fprintf(out, "%s{\"id\":\"%s\",\"lease_ms\":%lld}", j ? "," : "",
				dlock_semaphore_info_permit_id(v->sem, j),
				(long long)dlock_semaphore_info_permit_ttl_ms(v->sem, j));
	fprintf(out, "]}");
}

/* Holder j: owner and count (as always), then how long its hold lasts and,
 * for a reader, each read hold's own timeout. */
/* "holder": who registered as owner's client on this node, or null. */
static void print_json_registration(FILE *out, dlock_client *client, const char *owner)
{
	dlock_holder h = DLOCK_HOLDER_INIT;

	if (!cli_holder_lookup(&h, client, owner)) {
		fprintf(out, ",\"holder\":null");
		return;
	}
	fprintf(out, ",\"holder\":{\"host\":");
	json_string(out, h.host, strlen(h.host));
	fprintf(out, ",\"pid\":%lld,\"label\":", (long long)h.pid);
	json_string(out, h.label, strlen(h.label));
	fprintf(out, ",\"command\":");
	json_string(out, h.command, strlen(h.command));
	fprintf(out, ",\"since_ms\":%lld}", (long long)h.since_ms);
}

static void print_json_holder(FILE *out, dlock_client *client, const dlock_lock_info *info,
		size_t j)
{
	const char *owner = dlock_lock_info_holder_owner(info, j);
	size_t k, holds = dlock_lock_info_read_holds(info, j);

	fprintf(out, "%s{\"owner\":", j ? "," : "");
	json_string(out, owner, strlen(owner));
	fprintf(out, ",\"count\":%lld,\"ttl_ms\":%lld", (long long)dlock_lock_info_holder_count(info, j),
			(long long)dlock_lock_info_holder_ttl_ms(info, j));
	if (holds > 0) {
		fprintf(out, ",\"holds_ttl_ms\":[");
		for (k = 0; k < holds; k++)
			fprintf(out, "%s%lld", k ? "," : "",
					(long long)dlock_lock_info_read_hold_ttl_ms(info, j, k));
		fprintf(out, "]");
	}
	print_json_registration(out, client, owner);
	fprintf(out, "}");
}

/* Who waits: the clients listening on the name's channels (waiters, and
 * holders watching for a force unlock), and a fair lock's queue in order. */
static void print_json_waiters(FILE *out, const dlock_lock_info *info)
{
	size_t j;
	const char *w;

	fprintf(out, ",\"subscribers\":%lld,\"queued\":%zu,\"queue\":[",
			(long long)dlock_lock_info_subscribers(info), dlock_lock_info_queued(info));
	for (j = 0; (w = dlock_lock_info_queued_owner(info, j)) != NULL; j++) {
		fprintf(out, "%s{\"owner\":", j ? "," : "");
		json_string(out, w, strlen(w));
		fprintf(out, ",\"timeout_ms\":%lld}",
				(long long)dlock_lock_info_queued_ttl_ms(info, j));
	}
	fprintf(out, "]");
}

static void print_json_node(FILE *out, dlock_client *client, const node_view *v)
{
	const char *node = dlock_client_node(client);
	size_t j;

	fprintf(out, "{\"node\":");
	json_string(out, node, strlen(node));
	fprintf(out, ",\"reachable\":%s", v->reachable ? "true" : "false");
	if (v->sem != NULL) {
		print_json_count(out, v);
		return;
	}
	if (v->info == NULL) {
		fprintf(out, ",\"error\":");
		json_string(out, v->error, strlen(v->error));
		fprintf(out, "}");
		return;
	}
	fprintf(out, ",\"ttl_ms\":%lld,\"holders\":[", (long long)dlock_lock_info_ttl_ms(v->info));
	for (j = 0; j < dlock_lock_info_holders(v->info); j++)
		print_json_holder(out, client, v->info, j);
	fprintf(out, "]");
	if (v->kind == KIND_RWLOCK)
		fprintf(out, ",\"kind\":\"rwlock\",\"rw_mode\":\"%s\"",
				dlock_lock_info_rw_mode(v->info));
	print_json_waiters(out, v->info);
	fprintf(out, "}");
}

static void print_json(const cli_target *t, const node_view *v, const status_counts *c, FILE *out)
{
	size_t i;

	fprintf(out, "{\"name\":");
	json_string(out, t->name, strlen(t->name));
	fprintf(out, ",\"mode\":\"%s\",\"quorum\":%zu,\"held_on\":%zu,",
			mode_name(t->mode), cli_target_quorum(t), c->held);
	if (name_kind(t, v) != KIND_LOCK)
		fprintf(out, "\"kind\":\"%s\",", kind_name(name_kind(t, v)));
	fprintf(out, "\"nodes\":[");
	for (i = 0; i < t->n; i++) {
		fputs(i ? "," : "", out);
		print_json_node(out, t->clients[i], &v[i]);
	}
	fprintf(out, "]}\n");
}

/* A semaphore's or a latch's count: its permits taken, then what is free. */
static void print_table_count(FILE *out, int width, const char *node, const node_view *v)
{
	size_t j, used = dlock_semaphore_info_permits(v->sem);
	int64_t free_n = dlock_semaphore_info_available(v->sem);
	char lease[24];

	for (j = 0; j < used; j++) {
		int64_t ms = dlock_semaphore_info_permit_ttl_ms(v->sem, j);

		snprintf(lease, sizeof(lease), ms < 0 ? "-" : "%lld", (long long)ms);
		fprintf(out, "%-*s %-12s %-8s %-6d %s\n", width, j ? "" : node, "used", lease, 1,
				dlock_semaphore_info_permit_id(v->sem, j));
	}
	fprintf(out, "%-*s %-12s %-8s %-6lld %s\n", width, used ? "" : node,
			v->kind == KIND_COUNT || v->kind == KIND_LATCH ? "count" : "free", "-",
			(long long)free_n, "-");
}

/* After a holder's owner: "held by nightly [web-3 pid 4121 (./nightly.sh)] for 12m 3s"
 * when its client registered, else nothing (the owner says all there is). */
static const char *registration(dlock_client *client, const char *owner, char *buf, size_t len)
{
	char who[700], since[48];
	dlock_holder h = DLOCK_HOLDER_INIT;

	if (!cli_holder_lookup(&h, client, owner))
		return "";
	snprintf(buf, len, " held by %s %s", cli_holder_words(&h, who, sizeof(who)),
			cli_holder_since(&h, since, sizeof(since)));
	return buf;
}

/* A node without an answer to show: it answered with an error, it could
 * not be reached, or it was reached and cannot be used (a password is
 * wanted, or it is not a Redis server). */
static const char *node_state(const node_view *v)
{
	if (v->reachable)
		return "error";
	return v->rc == DLOCK_EAUTH || v->rc == DLOCK_EPROTO ? "unusable" : "unreachable";
}

static void print_table_node(FILE *out, int width, dlock_client *client, const node_view *v)
{
	const char *node = dlock_client_node(client);
	char reg[800];
	const char *w;
	size_t j;

	if (v->sem != NULL) {
		print_table_count(out, width, node, v);
		return;
	}
	if (v->info == NULL) {
		fprintf(out, "%-*s %-12s %s\n", width, node, node_state(v), v->error);
		return;
	}
	if (dlock_lock_info_holders(v->info) == 0)
		fprintf(out, "%-*s %-12s %-8s %-6s %s\n", width, node, "free", "-", "-", "-");
	for (j = 0; j < dlock_lock_info_holders(v->info); j++)
		fprintf(out, "%-*s %-12s %-8lld %-6lld %s%s\n", width, j ? "" : node,
				j                          ? ""
				: v->kind == KIND_RWLOCK ? dlock_lock_info_rw_mode(v->info)
							 : "held",
				(long long)dlock_lock_info_holder_ttl_ms(v->info, j),
				(long long)dlock_lock_info_holder_count(v->info, j),
				dlock_lock_info_holder_owner(v->info, j),
				registration(client, dlock_lock_info_holder_owner(v->info, j), reg,
						sizeof(reg)));
	/* A fair lock's queue, in order: how long each keeps its place. */
	for (j = 0; (w = dlock_lock_info_queued_owner(v->info, j)) != NULL; j++)
		fprintf(out, "%-*s %-12s %-8lld %-6s %s\n", width, "", "waiting",
				(long long)dlock_lock_info_queued_ttl_ms(v->info, j), "-", w);
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

/* The first node that has the kind k. */
static const node_view *first_of(const cli_target *t, const node_view *v, node_kind k)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (v[i].rc == 0 && v[i].kind == k)
			return &v[i];
	return NULL;
}

/* A lock's waiters for its first line: a fair lock's queue is exact; other
 * waiters are only seen as clients listening on the lock's channel, which
 * a holder watching for a force unlock (`dlock run`) does too. Nothing
 * when no one listens, so that a quiet lock's line is as it always was. */
static const char *waiting(const status_counts *c, char *buf, size_t len)
{
	if (c->queued > 0)
		snprintf(buf, len, ", %zu waiting", c->queued);
	else if (c->subscribers > 0)
		snprintf(buf, len, ", %lld waiting or watching", (long long)c->subscribers);
	else
		buf[0] = '\0';
	return buf;
}

/* The first line: what the name is and what it holds. */
static void print_heading(const cli_target *t, const node_view *v, const status_counts *c,
		node_kind k, FILE *out)
{
	const node_view *f = first_of(t, v, k);
	char where[128], wait[64];

	snprintf(where, sizeof(where), "%s, %zu node%s, quorum %zu", mode_name(t->mode), t->n,
			t->n == 1 ? "" : "s", cli_target_quorum(t));
	if (k == KIND_RWLOCK)
		fprintf(out, "read-write lock \"%s\" (%s): %s mode, held on %zu, reachable %zu%s\n",
				t->name, where, dlock_lock_info_rw_mode(f->info), c->held,
				c->reachable, waiting(c, wait, sizeof(wait)));
	else if (k == KIND_PERMITS)
		fprintf(out,
				"expirable semaphore \"%s\" (%s): %zu permit%s used, %lld free, "
				"%lld waiting, reachable %zu\n",
				t->name, where, dlock_semaphore_info_permits(f->sem),
				dlock_semaphore_info_permits(f->sem) == 1 ? "" : "s",
				(long long)dlock_semaphore_info_available(f->sem),
				(long long)dlock_semaphore_info_subscribers(f->sem), c->reachable);
	else if (k == KIND_SEMAPHORE)
		fprintf(out, "semaphore \"%s\" (%s): %lld free, %lld waiting, reachable %zu\n",
				t->name, where, (long long)dlock_semaphore_info_available(f->sem),
				(long long)dlock_semaphore_info_subscribers(f->sem), c->reachable);
	else if (k == KIND_LATCH)
		fprintf(out, "latch \"%s\" (%s): count %lld, %lld waiting, reachable %zu\n",
				t->name, where, (long long)dlock_semaphore_info_available(f->sem),
				(long long)f->latch_waiters, c->reachable);
	else if (k == KIND_COUNT)
		fprintf(out,
				"count \"%s\" (%s): %lld (a semaphore's free permits or a latch's "
				"count), reachable %zu\n",
				t->name, where, (long long)dlock_semaphore_info_available(f->sem),
				c->reachable);
	else
		fprintf(out, "lock \"%s\" (%s): held on %zu, reachable %zu%s\n", t->name, where,
				c->held, c->reachable, waiting(c, wait, sizeof(wait)));
}

void cli_status_print_table(const cli_target *t, const node_view *v, const status_counts *c, FILE *out)
{
	int width = node_width(t);
	node_kind k = name_kind(t, v);
	size_t i;

	print_heading(t, v, c, k, out);
	if (k != KIND_LOCK && k != KIND_RWLOCK)
		fprintf(out, "%-*s %-12s %-8s %-6s %s\n", width, "NODE", "STATE", "LEASE_MS",
				"COUNT", "PERMIT");
	else
		fprintf(out, "%-*s %-12s %-8s %-6s %s\n", width, "NODE", "STATE", "TTL_MS",
				"COUNT", "OWNER");
	for (i = 0; i < t->n; i++)
		print_table_node(out, width, t->clients[i], &v[i]);
}

/* A node that answered with an error is a failure; one that is down is
 * not, while a quorum can still be seen. */
static int status_exit(const cli_target *t, const status_counts *c)
{
	if (c->wrongtype > 0) {
		fprintf(stderr,
				"dlock: status: \"%s\" holds a value that is not a Redisson/dlock lock "
				"(another lock library?), semaphore or latch on %zu node%s\n",
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

void cli_status_read(cli_target *t, node_view *v, status_counts *c)
{
	size_t i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < t->n; i++) {
		view_node(t, i, &v[i]);
		c->reachable += v[i].reachable;
		c->refused += v[i].reachable && v[i].rc < 0;
		c->wrongtype += v[i].rc == DLOCK_EWRONGTYPE;
		c->held += view_held(&v[i]);
		if (dlock_lock_info_queued(v[i].info) > c->queued)
			c->queued = dlock_lock_info_queued(v[i].info);
		if (dlock_lock_info_subscribers(v[i].info) > c->subscribers)
			c->subscribers = dlock_lock_info_subscribers(v[i].info);
	}
}

void cli_status_free(const cli_target *t, node_view *v)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		dlock_lock_info_free(v[i].info);
		dlock_semaphore_info_free(v[i].sem);
		v[i].info = NULL;
		v[i].sem = NULL;
	}
}

size_t cli_view_holders(const node_view *v)
{
	return v->sem != NULL ? dlock_semaphore_info_permits(v->sem)
			      : dlock_lock_info_holders(v->info);
}

const char *cli_view_holder(const node_view *v, size_t i)
{
	return v->sem != NULL ? dlock_semaphore_info_permit_id(v->sem, i)
			      : dlock_lock_info_holder_owner(v->info, i);
}

int64_t cli_view_waiting(const node_view *v)
{
	if (v->kind == KIND_LATCH)
		return v->latch_waiters;
	if (v->sem != NULL)
		return dlock_semaphore_info_subscribers(v->sem);
	if (dlock_lock_info_queued(v->info) > 0)
		return (int64_t)dlock_lock_info_queued(v->info);
	return dlock_lock_info_subscribers(v->info);
}

const char *cli_view_waiting_words(const node_view *v)
{
	return v->sem == NULL && dlock_lock_info_queued(v->info) == 0 ? "waiting or watching"
								     : "waiting";
}

int cli_status_refuse_twice(cli_target *t)
{
	return refuse_one_server_twice(t, "status");
}

int cli_target_status(cli_target *t, int json, FILE *out)
{
	node_view *v = calloc(t->n, sizeof(*v));
	status_counts c;
	int status;

	if (v == NULL)
		return EXIT_UNAVAILABLE;
	cli_status_read(t, v, &c);
	status = refuse_one_server_twice(t, "status");
	if (status == 0 && json)
		print_json(t, v, &c, out);
	else if (status == 0)
		cli_status_print_table(t, v, &c, out);
	cli_status_free(t, v);
	free(v);
	return status != 0 ? status : status_exit(t, &c);
}

int cli_target_force(cli_target *t, FILE *out)
{
	size_t i, ok = 0, deleted = 0, permits = 0, wrongtype = 0;
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
					cli_hint(dlock_client_errmsg(t->clients[i])));
			continue;
		}
		rc = dlock_lock_force_release(&d, t->locks[i]);
		if (rc < 0) {
			fprintf(stderr, "dlock: unlock --force: %s\n",
					cli_hint(dlock_lock_errmsg(t->locks[i])));
			wrongtype += rc == DLOCK_EWRONGTYPE; /* another kind's key: left alone */
			continue;
		}
		ok++;
		deleted += d == 1;
		permits += d == 2;
	}
	free(pinged);
	if (permits > 0)
		fprintf(out, "gave back the taken permits of semaphore \"%s\" on %zu of %zu node%s\n",
				t->name, permits, t->n, t->n == 1 ? "" : "s");
	else if (ok > 0)
		fprintf(out, "deleted \"%s\" on %zu of %zu node%s\n", t->name, deleted, t->n,
				t->n == 1 ? "" : "s");
	if (ok >= cli_target_quorum(t))
		return 0;
	return wrongtype > 0 ? EXIT_WRONGTYPE : EXIT_UNAVAILABLE;
}
