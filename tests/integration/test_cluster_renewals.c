/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The watchdog on a Redis Cluster (3 primaries): a renewal script may only
 * touch one slot, so a round has an EVALSHA per slot held; those of one
 * node go out in one write on one connection, the nodes at once. Holds on
 * many slots keep their TTL with a short watchdog, a round costs each node
 * about one write (not one per slot), and a slot moved mid-run is followed
 * without the others noticing.
 *
 * Reaches inside (tests/CMakeLists.txt): the nodes' write counters
 * (core/net/conn.h), which the public stats do not have.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock.h>

#include "core/drive/client.h"
#include "core/topology/cluster.h"
#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

#define WATCHDOG_MS 900
#define HOLDS 200

static rh_cluster *cl;

static void cluster_up(void)
{
	cl = rh_cluster_start(3, 0, NULL);
	cr_assert_not_null(cl, "could not start a cluster");
}

static void cluster_down(void)
{
	rh_cluster_free(cl);
	cl = NULL;
}

TestSuite(cluster_renewals, .init = cluster_up, .fini = cluster_down, .timeout = 120);

/* Writes so far on each member's connections, by port. */
typedef struct writes {
	int port[16];
	uint64_t n[16];
	int count;
} writes;

static void note_member(dlock_client *m, void *arg)
{
	writes *w = arg;

	if (w->count < 16) {
		w->port[w->count] = m->node.port;
		w->n[w->count++] = atomic_load(&m->node.writes);
	}
}

static uint64_t writes_at(const writes *w, int port)
{
	for (int i = 0; i < w->count; i++)
		if (w->port[i] == port)
			return w->n[i];
	return 0;
}

static void writes_now(dlock_client *c, writes *w)
{
	memset(w, 0, sizeof *w);
	dlock__cluster_each_member(c->node.cluster, note_member, w);
}

static uint64_t renewals(dlock_client *c)
{
	dlock_stats *s = NULL;
	uint64_t n;

	dl_pass(dlock_client_stats(&s, c));
	n = s->renewals;
	dlock_stats_free(s);
	return n;
}

static void hold_all(dlock_client *c, dlock_lock *l[HOLDS])
{
	for (int i = 0; i < HOLDS; i++) {
		char name[24];

		snprintf(name, sizeof name, "renew-%d", i);
		l[i] = dl_lock(c, name);
		dl_pass(dlock_lock_acquire(l[i], NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	}
}

/* Every hold still ours, its key alive at the node serving it now with at
 * least `least_ms` to live; then released. */
static void all_kept(dlock_lock *l[HOLDS], int64_t least_ms)
{
	for (int i = 0; i < HOLDS; i++) {
		char name[24];
		int held = 0;
		int64_t ttl;

		snprintf(name, sizeof name, "renew-%d", i);
		dl_pass(dlock_lock_is_held(&held, l[i], NULL));
		cr_assert_eq(held, 1, "%s lost", name);
		ttl = rh_command_int(dl_slot_owner(cl, name), "PTTL %s", name);
		cr_assert_geq(ttl, least_ms, "%s has %lld ms to live at its node (at least %lld wanted)",
				name, (long long)ttl, (long long)least_ms);
		dl_pass(dlock_lock_release(l[i], NULL));
		dlock_lock_free(l[i]);
	}
}

Test(cluster_renewals, many_slots_are_renewed_in_one_write_per_node_and_round)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, WATCHDOG_MS);
	dlock_lock *l[HOLDS];
	int slots[3] = { 0 }, ports[3] = { 0 }, seen[16384] = { 0 };
	writes w0, w1;
	uint64_t r0, r1;

	hold_all(c, l);
	/* The slots each primary serves among the holds: a round's EVALSHAs there. */
	for (int i = 0; i < HOLDS; i++) {
		char name[24];
		int port, k;

		snprintf(name, sizeof name, "renew-%d", i);
		port = rh_server_port(dl_slot_owner(cl, name));
		if (seen[rh_cluster_key_slot(cl, name)]++)
			continue;
		for (k = 0; k < 3 && ports[k] != 0 && ports[k] != port; k++)
			;
		cr_assert_lt(k, 3, "more than 3 primaries");
		ports[k] = port;
		slots[k]++;
	}
	dl_sleep_ms(WATCHDOG_MS / 3 + 100); /* past the first round after the acquisitions */
	writes_now(c, &w0);
	r0 = renewals(c);
	dl_sleep_ms(3 * WATCHDOG_MS); /* only renewals keep them */
	writes_now(c, &w1);
	r1 = renewals(c);

	double rounds = (double)(r1 - r0) / HOLDS;
	cr_assert_geq(rounds, 5, "%.1f renewal rounds in %d ms (a round every %d ms wanted)", rounds,
			3 * WATCHDOG_MS, WATCHDOG_MS / 3);
	for (int k = 0; k < 3; k++) {
		uint64_t n = writes_at(&w1, ports[k]) - writes_at(&w0, ports[k]);

		cr_assert_gt(slots[k], 20, "the names do not spread over the slots");
		/* A round in progress at either end may add one. */
		cr_assert_leq((double)n, rounds + 2,
				"node :%d: %llu writes in %.1f rounds for %d slots (one a round wanted)",
				ports[k], (unsigned long long)n, rounds, slots[k]);
	}
	all_kept(l, WATCHDOG_MS / 3);
	dl_close_clients(c);
}

Test(cluster_renewals, a_slot_moved_mid_run_is_followed_and_the_others_are_kept)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, WATCHDOG_MS);
	dlock_lock *l[HOLDS];
	int slot = rh_cluster_key_slot(cl, "renew-0");
	rh_server *from = dl_slot_owner(cl, "renew-0"), *to = dl_other_primary(cl, from);
	int64_t t0;

	hold_all(c, l);
	dl_sleep_ms(WATCHDOG_MS / 3);
	/* Keys and all, while rounds go on: the next one there meets MOVED. */
	t0 = rh_now_ms();
	cr_assert_eq(rh_cluster_move_slot(cl, slot, to, 50), 0, "the slot did not move");
	cr_assert_lt(rh_now_ms() - t0, WATCHDOG_MS, "the move took %lld ms, longer than the TTL",
			(long long)(rh_now_ms() - t0));
	cr_assert_eq(dl_slot_owner(cl, "renew-0"), to);
	dl_sleep_ms(3 * WATCHDOG_MS);
	all_kept(l, WATCHDOG_MS / 3);
	dl_close_clients(c);
}

/* The client's stats: the holds it counts as held, and those it lost. */
static void held_lost(dlock_client *c, uint64_t *held, uint64_t *lost)
{
	dlock_stats *s = NULL;

	dl_pass(dlock_client_stats(&s, c));
	*held = s->held;
	*lost = s->lost;
	dlock_stats_free(s);
}

/*
 * Handles freed while held and renewed, in no particular order (each
 * forgets its hold, without an unlock): their keys are renewed no more and
 * expire, the other holds are kept, nothing is reported lost, and nothing
 * is left counted once all are freed.
 */
Test(cluster_renewals, handles_freed_in_any_order_forget_only_their_holds)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, WATCHDOG_MS);
	dlock_lock *l[HOLDS];
	uint64_t held, lost;

	hold_all(c, l);
	dl_sleep_ms(WATCHDOG_MS / 3); /* about when a round is due */
	for (int i = 0; i < HOLDS; i++) { /* 7 and HOLDS coprime: each once */
		int k = (i * 7) % HOLDS;

		if (k % 2 == 1) {
			dlock_lock_free(l[k]);
			l[k] = NULL;
		}
	}
	held_lost(c, &held, &lost);
	cr_assert_eq(held, HOLDS / 2, "%llu holds counted, %d wanted", (unsigned long long)held,
			HOLDS / 2);
	dl_sleep_ms(2 * WATCHDOG_MS); /* only renewals keep them */
	for (int i = 0; i < HOLDS; i++) {
		char name[24];
		int is = 0;

		snprintf(name, sizeof name, "renew-%d", i);
		if (l[i] != NULL) {
			dl_pass(dlock_lock_is_held(&is, l[i], NULL));
			cr_assert_eq(is, 1, "%s lost", name);
			cr_assert_gt(rh_command_int(dl_slot_owner(cl, name), "PTTL %s", name), 0,
					"%s has no TTL left at its node", name);
		} else {
			cr_assert_eq(rh_command_int(dl_slot_owner(cl, name), "EXISTS %s", name), 0,
					"%s still renewed after its handle was freed", name);
		}
	}
	for (int i = HOLDS - 1; i >= 0; i--) /* the rest, while held too */
		dlock_lock_free(l[(i * 7) % HOLDS]);
	held_lost(c, &held, &lost);
	cr_assert_eq(held, 0, "%llu holds still counted", (unsigned long long)held);
	cr_assert_eq(lost, 0, "%llu holds reported lost", (unsigned long long)lost);
	dl_close_clients(c);
}
