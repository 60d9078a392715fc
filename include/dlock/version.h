/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/version.h - the library version, in one place.
 */
#ifndef DLOCK_VERSION_H
#define DLOCK_VERSION_H

#include "common.h"

#define DLOCK_VERSION_MAJOR 0
#define DLOCK_VERSION_MINOR 1
#define DLOCK_VERSION_PATCH 0
#define DLOCK_VERSION_STRING "0.1.0"

/** The version as one comparable number: 0xMMmmpp. */
#define DLOCK_VERSION_NUMBER \
	((DLOCK_VERSION_MAJOR << 16) | (DLOCK_VERSION_MINOR << 8) | DLOCK_VERSION_PATCH)

/** True when the headers are at least version major.minor.patch. */
#define DLOCK_VERSION_CHECK(major, minor, patch) \
	(DLOCK_VERSION_NUMBER >= (((major) << 16) | ((minor) << 8) | (patch)))

#ifdef __cplusplus
extern "C" {
#endif

/** The version of the linked library, e.g. "0.1.0". Static storage. */
DLOCK_EXTERN const char *dlock_version(void);

#ifdef __cplusplus
}
#endif

#endif
