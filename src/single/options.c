/* SPDX-License-Identifier: BSD-3-Clause */
/* Lock options: defaults, the caller's copied per version, and checked. */
#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/base/fields.h"
#include "single/lock_internal.h"

/* The fields after `version`, and the version that added each. */
static const dlock__field fields[] = {
	DLOCK__FIELD(dlock_lock_options, kind, 1),
	DLOCK__FIELD(dlock_lock_options, fair_wait_ms, 1),
};
static const dlock_lock_options defaults = DLOCK_LOCK_OPTIONS_INIT;
static const dlock__versioned versioned = DLOCK__VERSIONED("lock options",
		"DLOCK_LOCK_OPTIONS_INIT", DLOCK_LOCK_OPTIONS_VERSION, dlock_lock_options,
		&defaults, fields);

int dlock_lock_options_init(dlock_lock_options *opts, unsigned int version)
{
	return dlock__versioned_init(opts, version, &versioned);
}

int dlock__lock_options_load(dlock_lock_options *dst, const dlock_lock_options *src)
{
	int rc = dlock__versioned_load(dst, src, &versioned);

	if (rc < 0)
		return rc;
	/* Read as an int: a caller's enum may hold any value. */
	switch ((int)dst->kind) {
	case DLOCK_LOCK_PLAIN:
	case DLOCK_LOCK_FAIR:
	case DLOCK_LOCK_FENCED:
	case DLOCK_LOCK_READ:
	case DLOCK_LOCK_WRITE:
		break;
	default:
		return dlock__seterr(DLOCK_EINVAL,
				"lock options: unknown kind %d (plain 0, fair 1, fenced 2, read 3, "
				"write 4)",
				(int)dst->kind);
	}
	if (dst->fair_wait_ms < 0)
		return dlock__seterr(DLOCK_EINVAL,
				"lock options: fair_wait_ms must be >= 0 (got %lld)",
				(long long)dst->fair_wait_ms);
	if (dst->fair_wait_ms == 0)
		dst->fair_wait_ms = DLOCK_FAIR_WAIT_DEFAULT;
	return 0;
}
