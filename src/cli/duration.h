/* SPDX-License-Identifier: BSD-3-Clause */
/* Durations on the command line: 250ms, 30s, 5m, 1h, 1.5s, 2h30m, or bare milliseconds. */
#ifndef DLOCK_CLI_DURATION_H
#define DLOCK_CLI_DURATION_H

#include <stddef.h>
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

/* ms as --help writes it, in its largest whole unit ("24h", "300ms", "0"),
 * into buf (which it returns); cli_duration_parse reads it back. */
const char *cli_duration_format(int64_t ms, char *buf, size_t len);

/*
 * An option's value: a whole number (count) or a duration from min to max.
 * 0, or -1 after one line on stderr naming the option as typed (`what`:
 * "-w", "--watchdog"), its range and text.
 */
int cli_option_count(const char *text, const char *what, int64_t min, int64_t max, int64_t *out);
int cli_option_duration(const char *text, const char *what, int64_t min, int64_t max, int64_t *out);

#endif
