/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hearing of member losses. Each member hold reports its own loss (on its
 * client's background thread); the lock is lost once fewer than a quorum
 * of its members are still held, and that is reported once per
 * acquisition: the owners still to report are "armed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/base/time.h"
#include "multilock/parts.h"
#include "single/holds.h"
#include "single/member.h"

/*
 * The key an owner is armed under, the same whichever member reports: an
 * explicit owner as it is, a thread owner as ":<tid>" (its uuid differs
 * from member to member).
 */
static void owner_key(const dlock__engine *e, const char *member_owner, char *key, size_t size)
{
	size_t i;

	for (i = 0; i < e->n; i++) {
		const char *id = dlock_client_id(dlock__lock_client(e->members[i]));

		if (strncmp(member_owner, id, 36) == 0 && member_owner[36] == ':') {
			snprintf(key, size, "%s", member_owner + 36);
			return;
		}
	}
	snprintf(key, size, "%s", member_owner);
}

/* e->mu held. */
static size_t armed_find(const dlock__engine *e, const char *key)
{
	size_t i;

	for (i = 0; i < e->narmed; i++)
		if (strcmp(e->armed[i], key) == 0)
			return i;
	return (size_t)-1;
}

static void arm(dlock__engine *e, const char *key)
{
	dlock__mutex_lock(&e->mu);
	if (armed_find(e, key) == (size_t)-1) {
		char **grown = dlock__realloc(e->armed, (e->narmed + 1) * sizeof(*grown));
		char *copy = dlock__strdup(key);

		if (grown != NULL)
			e->armed = grown;
		if (grown != NULL && copy != NULL)
			e->armed[e->narmed++] = copy;
		else
			dlock__free(copy); /* no callback for this hold; check() still tells */
	}
	dlock__mutex_unlock(&e->mu);
}

/* Remove the key (e->mu held); returns 1 when it was armed. */
static int disarm_locked(dlock__engine *e, const char *key)
{
	size_t i = armed_find(e, key);

	if (i == (size_t)-1)
		return 0;
	dlock__free(e->armed[i]);
	e->armed[i] = e->armed[--e->narmed];
	return 1;
}

void dlock__loss_disarm(dlock__engine *e, const char *member_owner)
{
	char key[DLOCK__OWNER_MAX + 1];

	owner_key(e, member_owner, key, sizeof(key));
	dlock__mutex_lock(&e->mu);
	disarm_locked(e, key);
	dlock__mutex_unlock(&e->mu);
}

/* Member i's owner field for an armed key (see owner_key). */
static const char *member_owner_of_key(
		const dlock__engine *e, size_t i, const char *key, char *buf, size_t size)
{
	if (key[0] != ':')
		return key;
	snprintf(buf, size, "%s%s", dlock_client_id(dlock__lock_client(e->members[i])), key);
	return buf;
}

/*
 * Member i's owner field for the reporting member's `owner`: a thread
 * owner is named after each member's client (the key maps it); an
 * explicit one - dlock_redlock_owner()'s too, named after the first
 * member's client - is the same on every member.
 */
static const char *member_owner_of(const dlock__engine *e, size_t i, const char *key,
		const char *owner, char *buf, size_t size)
{
	const char *mapped = member_owner_of_key(e, i, key, buf, size);

	return dlock__holds_state(e->members[i], mapped) != DLOCK_ENOTOWNER ? mapped : owner;
}

/* Members whose hold of the armed key is alive. */
static size_t alive_for_key(dlock__engine *e, const char *key, const char *owner)
{
	char buf[DLOCK__OWNER_MAX + 64];
	size_t i, alive = 0;

	for (i = 0; i < e->n; i++)
		alive += dlock__holds_state(e->members[i],
					 member_owner_of(e, i, key, owner, buf, sizeof(buf))) == 0;
	return alive;
}

/* The lock is lost: its surviving member holds stop being renewed. */
static void abandon_members(dlock__engine *e, const char *key, const char *owner)
{
	char buf[DLOCK__OWNER_MAX + 64];
	size_t i;

	for (i = 0; i < e->n; i++)
		dlock__holds_abandon(e->members[i], member_owner_of(e, i, key, owner, buf, sizeof(buf)));
}

/*
 * A member hold was lost (on that member client's background thread).
 * Members of different clients report on different threads, so the count
 * and the report happen under the engine's lock. Once the lock is lost, the
 * members still held stop being renewed: kept alive they would only block
 * the next holder until the owner unlocks (their keys expire instead).
 */
static void member_lost(void *arg, const char *owner, int reason)
{
	dlock__engine *e = arg;
	dlock__engine_lost_fn fn = NULL;
	void *ud = NULL;
	char key[DLOCK__OWNER_MAX + 1];
	int lost;

	owner_key(e, owner, key, sizeof(key));
	dlock__mutex_lock(&e->mu);
	lost = alive_for_key(e, key, owner) < e->rules.quorum && disarm_locked(e, key);
	if (lost) {
		fn = e->lost_fn;
		ud = e->lost_ud;
	}
	dlock__mutex_unlock(&e->mu);
	/* Outside e->mu: each member's table has its own lock. */
	if (lost) {
		abandon_members(e, key, owner);
		dlock__engine_stat_lost(e, owner, reason);
	}
	if (fn != NULL)
		fn(e->self, owner, reason, ud);
}

void dlock__loss_arm(dlock__engine *e, const dlock__member_try *t)
{
	char key[DLOCK__OWNER_MAX + 1];
	size_t i;

	owner_key(e, t[0].owner_ptr, key, sizeof(key));
	arm(e, key);
	for (i = 0; i < e->n; i++)
		if (t[i].st.vote == DLOCK_VOTE_ACQUIRED)
			dlock__holds_observe(e->members[i], t[i].owner_ptr, member_lost, e);
}

struct dlock__engine_link {
	pthread_mutex_t mu;
	dlock__engine *e; /* NULL once the engine is destroyed */
	atomic_int refs;
};

struct dlock__engine_link *dlock__link_new(dlock__engine *e)
{
	struct dlock__engine_link *l = dlock__calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	if (pthread_mutex_init(&l->mu, NULL) != 0)
		abort();
	l->e = e;
	atomic_init(&l->refs, 1);
	return l;
}

struct dlock__engine_link *dlock__link_ref(struct dlock__engine_link *l)
{
	atomic_fetch_add(&l->refs, 1);
	return l;
}

void dlock__link_unref(struct dlock__engine_link *l)
{
	if (l == NULL || atomic_fetch_sub(&l->refs, 1) > 1)
		return;
	pthread_mutex_destroy(&l->mu);
	dlock__free(l);
}

/* Before the engine unobserves its members: a join after this sees no engine. */
void dlock__link_cut(struct dlock__engine_link *l)
{
	dlock__mutex_lock(&l->mu);
	l->e = NULL;
	dlock__mutex_unlock(&l->mu);
	dlock__link_unref(l);
}

void dlock__loss_join(struct dlock__engine_link *l, dlock_lock *member, const char *owner)
{
	dlock__mutex_lock(&l->mu);
	if (l->e != NULL)
		dlock__holds_observe(member, owner, member_lost, l->e);
	dlock__mutex_unlock(&l->mu);
}

void dlock__link_release_ran(struct dlock__engine_link *l, size_t i)
{
	dlock__mutex_lock(&l->mu);
	if (l->e != NULL)
		atomic_store(&l->e->release_ran[i], 1);
	dlock__mutex_unlock(&l->mu);
}

void dlock__link_release_due(struct dlock__engine_link *l, size_t i, int delta)
{
	dlock__mutex_lock(&l->mu);
	if (l->e != NULL) {
		atomic_fetch_add(&l->e->release_due[i], delta);
		if (delta > 0)
			atomic_store(&l->e->due_at, dlock__now_ms());
		else
			dlock__engine_dues_woken(l->e);
	}
	dlock__mutex_unlock(&l->mu);
}

int dlock__link_release_gen(struct dlock__engine_link *l, unsigned *gen)
{
	int rc = -1;

	dlock__mutex_lock(&l->mu);
	if (l->e != NULL) {
		*gen = atomic_load(&l->e->release_gen);
		rc = 0;
	}
	dlock__mutex_unlock(&l->mu);
	return rc;
}

void dlock__holds_tally(const dlock__engine *e, const char *owner, size_t *alive, size_t *lost)
{
	char buf[64];
	size_t i;

	*alive = *lost = 0;
	for (i = 0; i < e->n; i++) {
		int s = dlock__holds_state(e->members[i], dlock__member_owner(e, i, owner, buf));

		*alive += s == 0;
		*lost += s == DLOCK_ELOST;
	}
}

int dlock__engine_check(const dlock__engine *e, const char *owner)
{
	size_t alive, lost;

	dlock__holds_tally(e, owner, &alive, &lost);
	if (alive >= e->rules.quorum)
		return 0;
	return alive + lost > 0 ? DLOCK_ELOST : DLOCK_ENOTOWNER;
}

/* The quorum-th longest of the members' validities: until then a quorum lasts. */
static int64_t quorum_validity(const int64_t *v, size_t n, size_t quorum)
{
	int64_t best = 0;
	size_t i, j;

	for (i = 0; i < n; i++) {
		size_t at_least = 0;

		for (j = 0; j < n; j++)
			at_least += v[j] >= v[i];
		if (at_least >= quorum && v[i] > best)
			best = v[i];
	}
	return best;
}

int dlock__engine_validity(const dlock__engine *e, const char *owner, int64_t *ms)
{
	char buf[64];
	int64_t *v = dlock__calloc(e->n, sizeof(*v));
	size_t i, alive = 0, lost = 0;

	*ms = 0;
	if (v == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "validity: out of memory");
	for (i = 0; i < e->n; i++) {
		int s = dlock__holds_validity(
				e->members[i], dlock__member_owner(e, i, owner, buf), &v[i]);

		alive += s == 0;
		lost += s == DLOCK_ELOST;
	}
	if (alive >= e->rules.quorum)
		*ms = quorum_validity(v, e->n, e->rules.quorum);
	dlock__free(v);
	if (*ms > 0)
		return 0;
	return alive + lost > 0 ? DLOCK_ELOST : DLOCK_ENOTOWNER;
}
