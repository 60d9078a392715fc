/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: versioned public structs (options the caller gives, the
 * allocator, member status the library fills) copied field by field. Each
 * has a table naming its fields and the version that added each; a copy
 * takes only the fields the caller's version has, so a program built against
 * older headers - whose struct is shorter - is never read or written past
 * its end. Adding a field is one line in the table. The struct's first
 * member is `unsigned int version`. Every public versioned struct goes
 * through dlock__versioned_check(), so a bad one is refused with the same
 * message whichever it is.
 */
#ifndef DLOCK_CORE_FIELDS_H
#define DLOCK_CORE_FIELDS_H

#include <stddef.h>

typedef struct dlock__field {
	size_t offset;
	size_t size;
	unsigned int since; /* the struct version that added it */
} dlock__field;

#define DLOCK__FIELD(type, member, since) \
	{ \
		offsetof(type, member), sizeof(((type *)0)->member), (since) \
	}

typedef struct dlock__versioned {
	const char *what;      /* "client options", in messages */
	const char *init_name; /* the INIT macro a message recommends */
	unsigned int current;  /* the newest version */
	size_t size;           /* of the current struct */
	const void *defaults;  /* a current struct of defaults */
	const dlock__field *fields;
	size_t nfields;
} dlock__versioned;

#define DLOCK__VERSIONED(what, init_name, current, type, defaults, fields) \
	{ \
		what, init_name, current, sizeof(type), defaults, fields, \
				sizeof(fields) / sizeof(*(fields)) \
	}

/* 0 when s is not NULL and its version is one this library knows, else
 * DLOCK_EINVAL with "<what>: unknown version N (this library knows 1..M)". */
int dlock__versioned_check(const void *s, const dlock__versioned *v);

/* opts->version = version, and the fields that version has set to their
 * defaults. 0, or DLOCK_EINVAL for NULL or an unknown version. */
int dlock__versioned_init(void *opts, unsigned int version, const dlock__versioned *v);

/* dst (a current struct) = the defaults, then src's fields as far as its
 * version has them (src NULL: the defaults). 0, or DLOCK_EINVAL. */
int dlock__versioned_load(void *dst, const void *src, const dlock__versioned *v);

/* dst (the caller's, its version set) = src's fields (a current struct) as
 * far as dst's version has them. 0, or DLOCK_EINVAL for NULL or an unknown
 * version. */
int dlock__versioned_store(void *dst, const void *src, const dlock__versioned *v);

#endif
