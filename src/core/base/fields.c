/* SPDX-License-Identifier: BSD-3-Clause */
/* Versioned public structs, copied field by field (see fields.h). */
#include <string.h>

#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/base/fields.h"

static int known_version(unsigned int version, const dlock__versioned *v)
{
	if (version > 0 && version <= v->current)
		return 0;
	return dlock__seterr(DLOCK_EINVAL,
			"%s: unknown version %u (this library knows 1..%u): initialise with %s",
			v->what, version, v->current, v->init_name);
}

int dlock__versioned_check(const void *s, const dlock__versioned *v)
{
	if (s == NULL)
		return dlock__seterr(DLOCK_EINVAL, "%s: NULL", v->what);
	return known_version(*(const unsigned int *)s, v);
}

static void copy_fields(void *dst, const void *src, unsigned int version, const dlock__versioned *v)
{
	for (size_t i = 0; i < v->nfields; i++) {
		const dlock__field *f = &v->fields[i];

		if (f->since <= version)
			memcpy((char *)dst + f->offset, (const char *)src + f->offset, f->size);
	}
}

int dlock__versioned_init(void *opts, unsigned int version, const dlock__versioned *v)
{
	int rc;

	if (opts == NULL)
		return dlock__seterr(DLOCK_EINVAL, "%s: NULL", v->what);
	if ((rc = known_version(version, v)) < 0)
		return rc;
	/* Only the fields `version` has: the caller's struct may end there. */
	*(unsigned int *)opts = version;
	copy_fields(opts, v->defaults, version, v);
	return 0;
}

int dlock__versioned_load(void *dst, const void *src, const dlock__versioned *v)
{
	int rc;

	memcpy(dst, v->defaults, v->size);
	if (src == NULL)
		return 0;
	if ((rc = dlock__versioned_check(src, v)) < 0)
		return rc;
	copy_fields(dst, src, *(const unsigned int *)src, v);
	return 0;
}

int dlock__versioned_store(void *dst, const void *src, const dlock__versioned *v)
{
	int rc;

	if ((rc = dlock__versioned_check(dst, v)) < 0)
		return rc;
	copy_fields(dst, src, *(const unsigned int *)dst, v);
	return 0;
}
