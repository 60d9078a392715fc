/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every kind that can make a name x every command used on it next, on a
 * real redis-server: the exit status of each, and for a refusal (65) or a
 * "not yours" (1) that nothing under the name changed (the DUMP and the
 * TTL of every key of the name) and, for 65, that the one line on stderr
 * names what the key is. The table below is the one docs/kinds.md shows:
 * a test renders it and finds it there, so the two cannot drift.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include <dlock.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#ifndef DLOCK_KINDS_DOC
#error "DLOCK_KINDS_DOC must name docs/kinds.md (tests/CMakeLists.txt defines it)"
#endif

TestSuite(cli_kinds, .init = dl_server_start, .fini = dl_server_stop, .timeout = 300);

/* What made the name, and what a refusal calls it. */
typedef enum row_id {
	R_LOCK,
	R_FAIR,
	R_FENCED,
	R_READ,
	R_WRITE,
	R_PERMITS,
	R_COUNT,
	R_LATCH,
	R_STRING,
	R_HASH,
	R_LIST,
	R_ZSET,
	R_NONE,
	ROWS
} row_id;

static const struct {
	const char *doc;  /* the row's header in docs/kinds.md */
	const char *kind; /* what a refusal's message calls it */
} rows[ROWS] = {
	[R_LOCK] = { "lock, held (`acquire`)", "a lock (RLock" },
	[R_FAIR] = { "fair lock, held (`acquire --fair`)", "a lock (RLock" },
	[R_FENCED] = { "fenced lock, held (`acquire --fenced`)", "a lock (RLock" },
	[R_READ] = { "read lock, held (`acquire -s`)", "a read-write lock" },
	[R_WRITE] = { "write lock, held (`acquire -x`)", "a read-write lock" },
	[R_PERMITS] = { "expirable semaphore, a permit taken (`run -c 2`)",
		"a semaphore with permits taken" },
	[R_COUNT] = { "semaphore count, no permit taken (RSemaphore, or `run -c 2` done)",
		"a count (a semaphore or a count-down latch)" },
	[R_LATCH] = { "count-down latch (`latch set`)", "a count-down latch" },
	[R_STRING] = { "another program's string (`SET k hello`)", "a string of another program" },
	[R_HASH] = { "another program's hash (`HSET k foo bar`)", "a hash of another program" },
	[R_LIST] = { "a list (`RPUSH k a`)", "a list of another program" },
	[R_ZSET] = { "a sorted set (`ZADD k 1 a`)", "a sorted set of another program" },
	[R_NONE] = { "nothing", NULL },
};

/* The commands used next: NAME stands for "@". */
static const struct {
	const char *doc;
	const char *args[10]; /* NULL-terminated */
} cols[] = {
	{ "run", { "run", "-w", "0", "@", "--", "true" } },
	{ "run --fair", { "run", "--fair", "-w", "0", "@", "--", "true" } },
	{ "run --fenced", { "run", "--fenced", "-w", "0", "@", "--", "true" } },
	{ "run -s", { "run", "-s", "-w", "0", "@", "--", "true" } },
	{ "run -x", { "run", "-x", "-w", "0", "@", "--", "true" } },
	{ "run -c 2", { "run", "-c", "2", "-w", "0", "@", "--", "true" } },
	{ "acquire", { "acquire", "-l", "10s", "--owner", "other", "@" } },
	{ "release", { "release", "--owner", "other", "@" } },
	{ "release --fair", { "release", "--fair", "--owner", "other", "@" } },
	{ "release -s", { "release", "-s", "--owner", "other", "@" } },
	{ "release -x", { "release", "-x", "--owner", "other", "@" } },
	{ "unlock --force", { "unlock", "--force", "@" } },
	{ "status", { "status", "@" } },
	{ "wait", { "wait", "-w", "0", "@" } },
	{ "latch set", { "latch", "set", "@", "5" } },
	{ "latch down", { "latch", "down", "@" } },
	{ "latch count", { "latch", "count", "@" } },
	{ "latch wait", { "latch", "wait", "-w", "0", "@" } },
};
#define COLS (sizeof(cols) / sizeof(cols[0]))

/*
 * The exit status of each cell: 0 done; 75 held by the row's holder (the
 * command waits for it, as for its own kind); 1 not held by that owner, a
 * latch that exists (set) or does not (down, count, wait); 65 refused:
 * another kind's key, nothing changed.
 */
static const int expected[ROWS][COLS] = {
	/*            run fair fenc  -s  -x  -c acq rel rfair rel-s rel-x force stat wait lset ldown lcount lwait */
	[R_LOCK] = { 75, 75, 75, 75, 75, 65, 75, 1, 1, 1, 1, 0, 0, 75, 65, 65, 65, 65 },
	[R_FAIR] = { 75, 75, 75, 75, 75, 65, 75, 1, 1, 1, 1, 0, 0, 75, 65, 65, 65, 65 },
	[R_FENCED] = { 75, 75, 75, 75, 75, 65, 75, 1, 1, 1, 1, 0, 0, 75, 65, 65, 65, 65 },
	[R_READ] = { 75, 75, 75, 0, 75, 65, 75, 1, 1, 1, 1, 0, 0, 75, 65, 65, 65, 65 },
	[R_WRITE] = { 75, 75, 75, 75, 75, 65, 75, 1, 1, 1, 1, 0, 0, 75, 65, 65, 65, 65 },
	[R_PERMITS] = { 65, 65, 65, 65, 65, 0, 65, 65, 65, 65, 65, 0, 0, 65, 65, 65, 65, 65 },
	[R_COUNT] = { 65, 65, 65, 65, 65, 0, 65, 65, 65, 65, 65, 0, 0, 65, 1, 0, 0, 75 },
	[R_LATCH] = { 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 0, 65, 1, 0, 0, 75 },
	[R_STRING] = { 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65 },
	[R_HASH] = { 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65 },
	[R_LIST] = { 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65 },
	[R_ZSET] = { 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65, 65 },
	[R_NONE] = { 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1 },
};

/* `status` reads whatever is there: its refusal has a line of its own. */
#define COL_STATUS 12

/* ---- the table as docs/kinds.md shows it ---- */

static void render_table(char *buf, size_t len)
{
	size_t n = 0;

#define OUT(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
	OUT("| the name was made as | ");
	for (size_t c = 0; c < COLS; c++)
		OUT("%s |%s", cols[c].doc, c + 1 < COLS ? " " : "\n");
	OUT("|---|");
	for (size_t c = 0; c < COLS; c++)
		OUT("---|%s", c + 1 < COLS ? "" : "\n");
	for (size_t r = 0; r < ROWS; r++) {
		OUT("| %s | ", rows[r].doc);
		for (size_t c = 0; c < COLS; c++)
			OUT("%d |%s", expected[r][c], c + 1 < COLS ? " " : "\n");
	}
#undef OUT
	cr_assert_lt(n, len, "the table needs more than %zu bytes", len);
}

Test(cli_kinds, docs_kinds_md_shows_this_table)
{
	static char want[16384], doc[65536];
	FILE *f = fopen(DLOCK_KINDS_DOC, "r");
	size_t n;

	cr_assert_not_null(f, "cannot open %s", DLOCK_KINDS_DOC);
	n = fread(doc, 1, sizeof(doc) - 1, f);
	fclose(f);
	doc[n] = '\0';
	render_table(want, sizeof want);
	cr_assert(strstr(doc, want) != NULL,
			"%s does not show the table this test walks; it should read:\n%s",
			DLOCK_KINDS_DOC, want);
}

/* ---- walking it ---- */

/* A key of the name as it was: its DUMP and TTL. */
typedef struct snap_key {
	char name[200];
	char *dump;
	size_t dump_len;
	long long pttl;
} snap_key;

typedef struct snap {
	snap_key k[16];
	size_t n;
} snap;

/* Every key of the name: the name itself, and those that carry it in
 * braces (a queue, a token, a read hold's timeout, a semaphore's permits,
 * a latch's mark). Names are made so that none is part of another. */
static void take_snap(snap *s, const char *name)
{
	redisReply *keys = rh_command(dl_srv, "KEYS *%s*", name);

	cr_assert(keys != NULL && keys->type == REDIS_REPLY_ARRAY);
	cr_assert_leq(keys->elements, 16, "%zu keys for %s", keys->elements, name);
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < keys->elements; i++) {
		snap_key *k = &s->k[s->n++];
		redisReply *d = rh_command(dl_srv, "DUMP %b", keys->element[i]->str,
				keys->element[i]->len);

		snprintf(k->name, sizeof k->name, "%s", keys->element[i]->str);
		cr_assert(d != NULL && d->type == REDIS_REPLY_STRING, "DUMP %s", k->name);
		k->dump = malloc(d->len);
		memcpy(k->dump, d->str, d->len);
		k->dump_len = d->len;
		freeReplyObject(d);
		k->pttl = rh_command_int(dl_srv, "PTTL %s", k->name);
	}
	freeReplyObject(keys);
}

static void free_snap(snap *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->k[i].dump);
	s->n = 0;
}

/* 0 when `after` holds the same keys with the same values and TTLs (a TTL
 * may only have run down, by less than the cell took); else a message. */
static int same_snap(const snap *before, const snap *after, int64_t took_ms, char *why,
		size_t len)
{
	if (before->n != after->n) {
		snprintf(why, len, "%zu keys before, %zu after", before->n, after->n);
		return -1;
	}
	for (size_t i = 0; i < before->n; i++) {
		const snap_key *b = &before->k[i], *a = NULL;

		for (size_t j = 0; j < after->n; j++)
			if (strcmp(after->k[j].name, b->name) == 0)
				a = &after->k[j];
		if (a == NULL) {
			snprintf(why, len, "%s is gone", b->name);
			return -1;
		}
		if (a->dump_len != b->dump_len || memcmp(a->dump, b->dump, b->dump_len) != 0) {
			snprintf(why, len, "%s changed (DUMP differs)", b->name);
			return -1;
		}
		if ((b->pttl < 0) != (a->pttl < 0) || a->pttl > b->pttl ||
				(b->pttl >= 0 && b->pttl - a->pttl > took_ms + 1000)) {
			snprintf(why, len, "%s: PTTL %lld before, %lld after", b->name, b->pttl,
					a->pttl);
			return -1;
		}
	}
	return 0;
}

static void run_ok(const char *name, const char *const *args)
{
	proc *p = dlock_env(NULL, args);

	cr_assert_eq(p->status, 0, "making %s: `%s` exited %d: %s", name, p->desc, p->status,
			p->err);
	proc_free(p);
}

/* Make `name` as the row's kind, held by "holder" where it is a lock. */
static void make(row_id r, const char *name, dlock_client *c)
{
	const char *uri = rh_server_uri(dl_srv);
	dlock_semaphore_options so = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;
	char id[DLOCK_PERMIT_ID_SIZE];

	switch (r) {
	case R_LOCK:
		run_ok(name, ARGS("-n", uri, "acquire", "-l", "60s", "--owner", "holder", name));
		break;
	case R_FAIR:
		run_ok(name, ARGS("-n", uri, "acquire", "--fair", "-l", "60s", "--owner", "holder",
					     name));
		break;
	case R_FENCED:
		run_ok(name, ARGS("-n", uri, "acquire", "--fenced", "-l", "60s", "--owner",
					     "holder", name));
		break;
	case R_READ:
		run_ok(name, ARGS("-n", uri, "acquire", "-s", "-l", "60s", "--owner", "holder", name));
		break;
	case R_WRITE:
		run_ok(name, ARGS("-n", uri, "acquire", "-x", "-l", "60s", "--owner", "holder", name));
		break;
	case R_PERMITS: /* 2 permits, one taken for a minute (the library's run -c) */
	case R_COUNT:   /* 2 permits, none taken: Redisson's RSemaphore's data */
		so.kind = r == R_PERMITS ? DLOCK_SEMAPHORE_EXPIRABLE : DLOCK_SEMAPHORE_PLAIN;
		dl_pass(dlock_semaphore_new(&s, c, name, &so));
		dl_pass(dlock_semaphore_try_set_permits(NULL, s, 2));
		if (r == R_PERMITS)
			dl_pass(dlock_semaphore_acquire_permit(id, s, 0, 60000));
		dlock_semaphore_free(s);
		break;
	case R_LATCH:
		run_ok(name, ARGS("-n", uri, "latch", "set", name, "2"));
		break;
	case R_STRING:
		freeReplyObject(rh_command(dl_srv, "SET %s hello", name));
		break;
	case R_HASH:
		cr_assert_eq(rh_command_int(dl_srv, "HSET %s foo bar", name), 1);
		break;
	case R_LIST:
		cr_assert_eq(rh_command_int(dl_srv, "RPUSH %s a", name), 1);
		break;
	case R_ZSET:
		cr_assert_eq(rh_command_int(dl_srv, "ZADD %s 1 a", name), 1);
		break;
	default:
		break;
	}
}

/* One cell: 0 when it behaved as the table says, else 1 (reported). */
static int walk_cell(size_t r, size_t c, dlock_client *client)
{
	const char *args[16] = { "-n", rh_server_uri(dl_srv), "--timeout", "2s" };
	size_t n = 4;
	char name[64], why[256] = "";
	snap before, after;
	int want = expected[r][c], bad = 0;

	snprintf(name, sizeof name, "kinds.%zu.%zu.", r, c);
	make((row_id)r, name, client);
	take_snap(&before, name);
	for (size_t i = 0; cols[c].args[i] != NULL; i++)
		args[n++] = strcmp(cols[c].args[i], "@") == 0 ? name : cols[c].args[i];
	args[n] = NULL;
	proc *p = dlock_env(NULL, args);

	if (p->status != want) {
		cr_log_error("%s then %s: `%s` exited %d, the table says %d; stderr: %s",
				rows[r].doc, cols[c].doc, p->desc, p->status, want, p->err);
		bad = 1;
	} else if (want == 65 || want == 1) {
		take_snap(&after, name);
		if (same_snap(&before, &after, proc_elapsed(p), why, sizeof why) != 0) {
			cr_log_error("%s then %s: `%s` exited %d but changed the name: %s",
					rows[r].doc, cols[c].doc, p->desc, p->status, why);
			bad = 1;
		}
		free_snap(&after);
		if (want == 65 && !one_line(p->err)) {
			cr_log_error("%s then %s: stderr is not one line: %s", rows[r].doc,
					cols[c].doc, p->err);
			bad = 1;
		}
		if (want == 65 && c != COL_STATUS && strstr(p->err, rows[r].kind) == NULL) {
			cr_log_error("%s then %s: the refusal does not say the key is %s...: %s",
					rows[r].doc, cols[c].doc, rows[r].kind, p->err);
			bad = 1;
		}
	}
	free_snap(&before);
	proc_free(p);
	return bad;
}

Test(cli_kinds, every_kind_meets_every_command_as_the_table_says)
{
	dlock_client *client = dl_client(rh_server_uri(dl_srv), 2000, 0);
	int64_t t0 = rh_now_ms();
	size_t failed = 0;

	for (size_t r = 0; r < ROWS; r++)
		for (size_t c = 0; c < COLS; c++)
			failed += (size_t)walk_cell(r, c, client);
	cr_assert_eq(failed, 0, "%zu of %zu cells differ from the table (each logged above)",
			failed, (size_t)ROWS * COLS);
	cr_log_info("%zu cells in %lld ms", (size_t)ROWS * COLS, (long long)(rh_now_ms() - t0));
	dlock_client_free(client);
}

/* `unlock --force` on an expirable semaphore gives every permit back: a run
 * waiting for one takes it at once (woken by the count published), and the
 * total its users set stays. */
Test(cli_kinds, unlock_force_gives_every_permit_back_to_the_waiters)
{
	const char *uri = rh_server_uri(dl_srv);
	dlock_client *c = dl_client(uri, 2000, 0);
	dlock_semaphore_options so = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;
	char id[DLOCK_PERMIT_ID_SIZE];

	so.kind = DLOCK_SEMAPHORE_EXPIRABLE;
	dl_pass(dlock_semaphore_new(&s, c, "full", &so));
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 2));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, 60000));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, 60000));

	proc *w = dlock_bg(ARGS("-n", uri, "run", "-c", "2", "-w", "15s", "full", "--", "true"));
	/* The waiter listens once it has found no permit free: its subscription shows. */
	int64_t until = rh_now_ms() + 10000;
	while (rh_command_int(dl_srv, "PUBSUB NUMSUB redisson_sc:{full}") == 0 &&
			rh_now_ms() < until)
		dl_sleep_ms(20);
	proc *f = DLOCK("-n", uri, "unlock", "--force", "full");
	ASSERT_STATUS(f, 0);
	int64_t at = rh_now_ms();
	proc_free(f);
	proc_wait(w, HARD_TIMEOUT_S);
	EXPECT_STATUS(w, 0);
	cr_expect_lt(w->t1 - at, 5000, "the waiting run ended %lld ms after the force unlock",
			(long long)(w->t1 - at));
	proc_free(w);

	redisReply *r = rh_command(dl_srv, "GET full");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, "2") == 0,
			"the count after: %s", r && r->str ? r->str : "(none)");
	freeReplyObject(r);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS {full}:timeout"), 0, "permits left taken");
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

/* A latch Redisson counted down to zero leaves dlock's mark (it deletes
 * only its key): the next look clears it, and a semaphore made there is
 * one. */
Test(cli_kinds, a_latch_mark_left_behind_does_not_make_a_semaphore_a_latch)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p = DLOCK("-n", uri, "latch", "set", "gone", "1");

	ASSERT_STATUS(p, 0);
	proc_free(p);
	cr_assert_eq(rh_command_int(dl_srv, "DEL gone"), 1); /* Redisson's count down to zero */
	p = DLOCK("-n", uri, "run", "-c", "2", "-w", "0", "gone", "--", "true");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS dlock_latch:{gone}"), 0, "the mark stayed");
	p = DLOCK("-n", uri, "latch", "down", "gone");
	EXPECT_STATUS(p, 0); /* a count alone: Redisson's data cannot tell (docs/kinds.md) */
	proc_free(p);
}
