/* SPDX-License-Identifier: BSD-3-Clause */
/* The allocator hook: the library's only global state, set before use. */
#include <stdlib.h>
#include <string.h>

#include "dlock/common.h"
#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"

static dlock_allocator allocator = { DLOCK_ALLOCATOR_VERSION, malloc, realloc, free };

int dlock_set_allocator(const dlock_allocator *a)
{
	if (a == NULL) {
		allocator.malloc_fn = malloc;
		allocator.realloc_fn = realloc;
		allocator.free_fn = free;
		return 0;
	}
	if (a->version == 0 || a->version > DLOCK_ALLOCATOR_VERSION)
		return dlock__seterr(DLOCK_EINVAL,
				"allocator: unknown version %u (this library "
				"knows 1..%d)",
				a->version, DLOCK_ALLOCATOR_VERSION);
	if (a->malloc_fn == NULL || a->realloc_fn == NULL || a->free_fn == NULL)
		return dlock__seterr(DLOCK_EINVAL, "allocator: a function is NULL");
	/* Version 1's fields; later versions add theirs here. */
	allocator.malloc_fn = a->malloc_fn;
	allocator.realloc_fn = a->realloc_fn;
	allocator.free_fn = a->free_fn;
	return 0;
}

void *dlock__malloc(size_t size)
{
	return allocator.malloc_fn(size ? size : 1);
}

void *dlock__calloc(size_t n, size_t size)
{
	void *p;

	if (size != 0 && n > (size_t)-1 / size)
		return NULL;
	p = dlock__malloc(n * size);
	if (p != NULL)
		memset(p, 0, n * size);
	return p;
}

void *dlock__realloc(void *ptr, size_t size)
{
	return allocator.realloc_fn(ptr, size ? size : 1);
}

void dlock__free(void *ptr)
{
	if (ptr != NULL)
		allocator.free_fn(ptr);
}

char *dlock__strndup(const char *s, size_t n)
{
	char *p = dlock__malloc(n + 1);

	if (p == NULL)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *dlock__strdup(const char *s)
{
	return dlock__strndup(s, strlen(s));
}
