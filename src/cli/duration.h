/* SPDX-License-Identifier: BSD-3-Clause */
/* Durations on the command line: 250ms, 30s, 5m, 1h, 1.5s, 2h30m, or bare milliseconds. */
#ifndef DLOCK_CLI_DURATION_H
#define DLOCK_CLI_DURATION_H

#include <stdint.h>

/* The accepted forms, for messages. */
#define CLI_DURATION_FORMS "250ms, 30s, 1.5s, 5m, 1h, 2h30m or bare milliseconds (1500)"

/*
 * Parse text as a duration into *ms: a bare whole number is milliseconds;
 * otherwise one or more <number><unit> parts, units ms, s, m, h, each
 * number with an optional fraction ("1.5s"), units from larger to smaller
 * without repeats ("2h30m", "1m30s"). The total must be a whole number of
 * milliseconds and at most INT64_MAX / 2. Returns 0, or -1 (*ms untouched).
 */
int cli_duration_parse(const char *text, int64_t *ms);

#endif
