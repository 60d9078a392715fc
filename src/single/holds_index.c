/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Finding a hold in the table: by lock name, owner and form (the buckets,
 * grown as holds come), and by handle (the handle index, so that freeing a
 * handle does not walk a table grown for every handle's holds).
 */
#include <stdint.h>
#include <string.h>

#include "core/base/alloc.h"
#include "single/holds_table.h"
#include "single/lock_internal.h"

/* 8 bytes at a time (this runs several times per lock operation). */
static uint64_t mix(uint64_t h, const char *p, size_t n)
{
	uint64_t w;

	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, p, n);
	h = (h ^ w ^ n) * 0x9E3779B97F4A7C15ULL;
	return h ^ (h >> 32);
}

static size_t hash_key(const char *name, size_t name_len, const char *owner)
{
	return (size_t)mix(mix(0x243F6A8885A308D3ULL, name, name_len), owner, strlen(owner));
}

hold **dlock__holds_link(
		dlock__holds *h, const char *name, size_t name_len, const char *owner, char form)
{
	hold **link = &h->buckets[hash_key(name, name_len, owner) & (h->nbuckets - 1)];

	for (; *link != NULL; link = &(*link)->next)
		if ((*link)->name_len == name_len && memcmp((*link)->name, name, name_len) == 0 &&
				strcmp((*link)->owner, owner) == 0 && (*link)->form == form)
			return link;
	return link;
}

hold *dlock__holds_find(
		dlock__holds *h, const char *name, size_t name_len, const char *owner, char form)
{
	return *dlock__holds_link(h, name, name_len, owner, form);
}

/* The link to l's hold of owner (where it would be), h->mu held. */
hold **dlock__holds_link_of(const dlock_lock *l, const char *owner)
{
	return dlock__holds_link(l->holds, l->name, l->name_len, owner, dlock__lock_form(l));
}

/* l's hold of owner, or NULL; h->mu held. */
static hold *find_of(const dlock_lock *l, const char *owner)
{
	return *dlock__holds_link_of(l, owner);
}

/* Lock the table and find owner's hold of l (NULL: none); the caller unlocks. */
hold *dlock__holds_lock_find(dlock__holds *h, const dlock_lock *l, const char *owner)
{
	dlock__mutex_lock(&h->mu);
	return find_of(l, owner);
}

void dlock__holds_grow(dlock__holds *h)
{
	size_t n = h->nbuckets * 2, i;
	hold **b = dlock__calloc(n, sizeof(*b));

	if (b == NULL)
		return; /* longer chains, still correct */
	for (i = 0; i < h->nbuckets; i++) {
		hold *x = h->buckets[i], *next;

		for (; x != NULL; x = next) {
			size_t k = hash_key(x->name, x->name_len, x->owner) & (n - 1);

			next = x->next;
			x->next = b[k];
			b[k] = x;
		}
	}
	dlock__free(h->buckets);
	h->buckets = b;
	h->nbuckets = n;
}

/* ---- the handle index: a handle's holds without walking the table ---- */

static size_t hash_ptr(const void *p)
{
	uint64_t v = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL;

	return (size_t)(v ^ (v >> 32));
}

/* Where handle's entry is, or would go; NULL when the index has no buckets. */
handle_entry **dlock__holds_handle_link(const dlock__holds *h, const dlock_lock *handle)
{
	handle_entry **e;

	if (h->nhandle_buckets == 0)
		return NULL;
	e = &h->handles[hash_ptr(handle) & (h->nhandle_buckets - 1)];
	while (*e != NULL && (*e)->handle != handle)
		e = &(*e)->next;
	return e;
}

static void handles_grow(dlock__holds *h)
{
	size_t n = h->nhandle_buckets ? h->nhandle_buckets * 2 : 16, i;
	handle_entry **b = dlock__calloc(n, sizeof(*b)), *e, *next;

	if (b == NULL)
		return; /* longer chains, still correct */
	for (i = 0; i < h->nhandle_buckets; i++)
		for (e = h->handles[i]; e != NULL; e = next) {
			size_t k = hash_ptr(e->handle) & (n - 1);

			next = e->next;
			e->next = b[k];
			b[k] = e;
		}
	dlock__free(h->handles);
	h->handles = b;
	h->nhandle_buckets = n;
}

/* x no longer belongs to a handle (h->mu held). */
void dlock__holds_clear_handle(dlock__holds *h, hold *x)
{
	handle_entry **link, *e;

	if (x->handle == NULL)
		return;
	if (!x->indexed) {
		h->unindexed--;
		x->handle = NULL;
		return;
	}
	link = dlock__holds_handle_link(h, x->handle);
	e = *link;
	if (x->hprev != NULL)
		x->hprev->hnext = x->hnext;
	else
		e->holds = x->hnext;
	if (x->hnext != NULL)
		x->hnext->hprev = x->hprev;
	x->hprev = x->hnext = NULL;
	x->indexed = 0;
	x->handle = NULL;
	if (e->holds == NULL) {
		*link = e->next;
		dlock__free(e);
		h->nhandles--;
	}
}

/* x belongs to handle from now (h->mu held). Out of memory, it is left
 * out of the index, and detach and the callbacks walk the table for it. */
void dlock__holds_set_handle(dlock__holds *h, hold *x, dlock_lock *handle)
{
	handle_entry **link, *e;

	if (x->handle == handle)
		return;
	dlock__holds_clear_handle(h, x);
	x->handle = handle;
	if (handle == NULL)
		return;
	if (h->nhandles >= h->nhandle_buckets)
		handles_grow(h);
	link = dlock__holds_handle_link(h, handle);
	e = link != NULL ? *link : NULL;
	if (link != NULL && e == NULL && (e = dlock__calloc(1, sizeof(*e))) != NULL) {
		e->handle = handle;
		*link = e;
		h->nhandles++;
	}
	if (e == NULL) {
		h->unindexed++;
		return;
	}
	x->hprev = NULL;
	x->hnext = e->holds;
	if (e->holds != NULL)
		e->holds->hprev = x;
	e->holds = x;
	x->indexed = 1;
}

/* Whether handle has a hold in the table (h->mu held). */
int dlock__holds_handle_attached(const dlock__holds *h, const dlock_lock *handle)
{
	handle_entry **link = dlock__holds_handle_link(h, handle);
	size_t k;
	hold *x;

	if (link != NULL && *link != NULL)
		return 1;
	/* Out of memory once, a hold of it may have stayed out of the index. */
	for (k = 0; h->unindexed > 0 && k < h->nbuckets; k++)
		for (x = h->buckets[k]; x != NULL; x = x->next)
			if (x->handle == handle)
				return 1;
	return 0;
}
