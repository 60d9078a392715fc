/* SPDX-License-Identifier: BSD-3-Clause */
/* The allocator hook: the library's only global state, set before use. */
#include <stdlib.h>
#include <string.h>

#include "dlock/common.h"
#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/base/fields.h"

static dlock_allocator allocator = { DLOCK_ALLOCATOR_VERSION, malloc, realloc, free };

/* The fields after `version`, and the version that added each. */
static const dlock__field fields[] = {
	DLOCK__FIELD(dlock_allocator, malloc_fn, 1),
	DLOCK__FIELD(dlock_allocator, realloc_fn, 1),
	DLOCK__FIELD(dlock_allocator, free_fn, 1),
};
static const dlock_allocator defaults = { DLOCK_ALLOCATOR_VERSION, malloc, realloc, free };
static const dlock__versioned versioned = DLOCK__VERSIONED("allocator",
		"version = DLOCK_ALLOCATOR_VERSION", DLOCK_ALLOCATOR_VERSION, dlock_allocator,
		&defaults, fields);

int dlock_allocator_init(dlock_allocator *a, unsigned int version)
{
	return dlock__versioned_init(a, version, &versioned);
}

int dlock_set_allocator(const dlock_allocator *a)
{
	dlock_allocator next;
	int rc;

	/* NULL loads the defaults: malloc, realloc, free. */
	if ((rc = dlock__versioned_load(&next, a, &versioned)) < 0)
		return rc;
	if (next.malloc_fn == NULL || next.realloc_fn == NULL || next.free_fn == NULL)
		return dlock__seterr(DLOCK_EINVAL, "allocator: a function is NULL");
	allocator = next;
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
