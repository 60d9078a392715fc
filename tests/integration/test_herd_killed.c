/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Waiters that die (SIGKILL: they leave nothing behind but their members
 * of dlock_lock__waiters:{name}) must never stall a live one: a released
 * lock reaches a live waiter at once, whoever released it (dlock, or a
 * Redisson holder that only publishes "0"), and a wait with a deadline
 * makes a last attempt before it gives up. Real `dlock run` processes on a
 * real server; the holders' TTLs are 30 s, the bounds a few seconds.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"
#define KILLED 6

TestSuite(herd_killed, .init = dl_server_start, .fini = dl_server_stop, .timeout = 90);

static long long numsub(const char *channel)
{
	redisReply *r = rh_command(dl_srv, "PUBSUB NUMSUB %s", channel);
	long long n;

	cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
			r->element[1]->type == REDIS_REPLY_INTEGER,
			"PUBSUB NUMSUB %s", channel);
	n = r->element[1]->integer;
	freeReplyObject(r);
	return n;
}

/* Wait (5 s at most) until the waiters' ZSET of `name` has `members` and
 * `watching` processes listen on its lock's channel (-1: any number). */
static int await_waiters(const char *name, int64_t members, long long watching)
{
	char set[128], channel[128];
	int64_t until = rh_now_ms() + 5000;

	snprintf(set, sizeof(set), "dlock_lock__waiters:{%s}", name);
	snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
	for (;; dl_sleep_ms(10)) {
		if (rh_command_int(dl_srv, "ZCARD %s", set) == members &&
				(watching < 0 || numsub(channel) == watching))
			return 1;
		if (rh_now_ms() > until)
			return 0;
	}
}

static void await_held(const char *name)
{
	int64_t until = rh_now_ms() + 5000;

	while (rh_command_int(dl_srv, "EXISTS %s", name) != 1 && rh_now_ms() < until)
		dl_sleep_ms(10);
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS %s", name), 1, "nobody took %s", name);
}

/* Held by a Redisson process's owner with its watchdog's 30 s. */
static void hold_as_redisson(const char *name)
{
	cr_assert_eq(rh_command_int(dl_srv, "HSET %s 6f2e-redisson:1 1", name), 1);
	cr_assert_eq(rh_command_int(dl_srv, "PEXPIRE %s 30000", name), 1);
}

/* Redisson's unlock: the key deleted, "0" published; dlock's waiters untouched. */
static void release_as_redisson(const char *name)
{
	static const char unlock[] =
			"redis.call('del', KEYS[1]); return redis.call('publish', KEYS[2], '0')";
	redisReply *r = rh_command(dl_srv, "EVAL %s 2 %s redisson_lock__channel:{%s}", unlock,
			name, name);

	cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER, "Redisson's unlock of %s", name);
	freeReplyObject(r);
}

/* `n` waiting runs on `name` (-w 20s), all joined the waiters; `first` of
 * them are there already. */
static void start_waiters(proc **w, int n, const char *name, int first)
{
	for (int i = 0; i < n; i++)
		w[i] = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "-w",
				"20s", name, "--", "true"));
	cr_assert(await_waiters(name, first + n, -1), "%d waiting runs did not join the waiters",
			n);
}

static void kill_all(proc **w, int n)
{
	for (int i = 0; i < n; i++) {
		cr_assert_eq(kill(w[i]->pid, SIGKILL), 0);
		proc_wait(w[i], HARD_TIMEOUT_S);
		cr_assert_eq(w[i]->status, 128 + SIGKILL, "`%s` exited %d before it was killed",
				w[i]->desc, w[i]->status);
		proc_free(w[i]);
	}
}

/* The run: killed waiters, then a holder that releases after 1 s
 * and a waiter behind it, which must not wait for the TTL (30 s). */
Test(herd_killed, killed_waiters_do_not_stall_the_next_waiter)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *w[KILLED], *holder, *next, *last;

	holder = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "hk", "--", "sleep", "2"));
	await_held("hk");
	start_waiters(w, KILLED, "hk", 0);
	kill_all(w, KILLED);
	cr_assert_eq(proc_wait(holder, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(holder, 0);
	next = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "hk", "--", "sleep", "1"));
	await_held("hk");
	last = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "-w", "10s", "hk", "--", "true"));
	proc_wait(last, HARD_TIMEOUT_S);
	proc_wait(next, HARD_TIMEOUT_S);
	EXPECT_STATUS(next, 0);
	ASSERT_STATUS(last, 0);
	cr_assert_lt(proc_elapsed(last), 4000,
			"a waiter behind a holder of 1 s took the lock after %lld ms (TTL 30 s)",
			(long long)proc_elapsed(last));
	proc_free(holder);
	proc_free(next);
	proc_free(last);
}

/* A waiter that comes after killed ones watches in their place (they are
 * dropped), so that it hears a Redisson holder's unlock - which tells
 * nothing to dlock's waiters. */
Test(herd_killed, a_waiter_behind_killed_ones_hears_a_redisson_unlock)
{
	proc *w[KILLED], *live;
	int64_t released;

	hold_as_redisson("hk2");
	start_waiters(w, KILLED, "hk2", 0);
	kill_all(w, KILLED);
	live = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "-w", "15s",
			"hk2", "--", "true"));
	cr_assert(await_waiters("hk2", 1, 1),
			"the live waiter does not watch alone: %lld waiters, %lld on the lock",
			(long long)rh_command_int(dl_srv, "ZCARD dlock_lock__waiters:{hk2}"),
			numsub("redisson_lock__channel:{hk2}"));
	released = rh_now_ms();
	release_as_redisson("hk2");
	proc_wait(live, HARD_TIMEOUT_S);
	ASSERT_STATUS(live, 0);
	cr_assert_lt(live->t1 - released, 3000, "the waiter took a free lock after %lld ms",
			(long long)(live->t1 - released));
	proc_free(live);
}

/* A holder that came through the waiters drops the killed ones from them
 * when it releases: a sleeper behind them would be told to watch at once. */
Test(herd_killed, a_release_drops_killed_watchers)
{
	proc *w[KILLED], *holder;

	hold_as_redisson("hk5");
	holder = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "-w", "20s",
			"hk5", "--", "sleep", "1"));
	cr_assert(await_waiters("hk5", 1, 1), "the first waiter did not watch");
	start_waiters(w, KILLED, "hk5", 1);
	kill_all(w, KILLED);
	/* It hears Redisson's unlock and takes the lock; the killed remain. */
	release_as_redisson("hk5");
	cr_assert_eq(proc_wait(holder, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(holder, 0);
	cr_assert_eq(rh_command_int(dl_srv, "ZCARD dlock_lock__waiters:{hk5}"), 0,
			"killed waiters are still among the waiters after a release");
	proc_free(holder);
}

/* A sleeper whose watchers die after it joined, under a Redisson holder
 * that releases without telling it: it looks by itself within seconds,
 * not at the stale TTL of 30 s it was told. */
Test(herd_killed, a_sleeper_does_not_sleep_a_stale_ttl)
{
	proc *w[4], *sleeper;
	int64_t released;

	hold_as_redisson("hk3");
	start_waiters(w, 4, "hk3", 0);
	sleeper = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "-w", "20s",
			"hk3", "--", "true"));
	cr_assert(await_waiters("hk3", 5, 4), "four watchers and a sleeper did not settle");
	kill_all(w, 4);
	released = rh_now_ms();
	release_as_redisson("hk3");
	proc_wait(sleeper, HARD_TIMEOUT_S);
	ASSERT_STATUS(sleeper, 0);
	cr_assert_lt(sleeper->t1 - released, 6000, "the sleeper took a free lock after %lld ms",
			(long long)(sleeper->t1 - released));
	proc_free(sleeper);
}

/* A holder that dies and whose key goes without a word (no "0"): a wait
 * of 3 s that was told a TTL of 30 s still takes the lock at its end. */
Test(herd_killed, a_wait_makes_a_last_attempt_before_it_gives_up)
{
	proc *run;

	hold_as_redisson("hk4");
	run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "-w", "3s", "hk4",
			"--", "true"));
	dl_sleep_ms(1500); /* the run waits meanwhile (checked below: it took 3 s) */
	cr_assert_eq(rh_command_int(dl_srv, "DEL hk4"), 1, "the holder's key was gone early");
	proc_wait(run, HARD_TIMEOUT_S);
	ASSERT_STATUS(run, 0);
	cr_assert_geq(proc_elapsed(run), 2500, "the run did not wait (%lld ms)",
			(long long)proc_elapsed(run));
	cr_assert_lt(proc_elapsed(run), 6000, "the run ended after %lld ms",
			(long long)proc_elapsed(run));
	proc_free(run);
}
