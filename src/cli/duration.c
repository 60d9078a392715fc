/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One parser for every time the command line takes (-w, -l, --grace,
 * --timeout, ...): cron lines and shell scripts read better with "30s" and
 * "5m" than with 30000 and 300000, and flock(1), timeout(1) and etcdctl
 * users write them that way. A bare number stays milliseconds, as it always
 * was, so existing scripts keep their meaning.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"

#define DURATION_MAX (INT64_MAX / 2)

/* The unit at *p: its length in *len and its size in ms; 0 when none. */
static int64_t unit_ms(const char *p, size_t *len)
{
	if (strncmp(p, "ms", 2) == 0) {
		*len = 2;
		return 1;
	}
	*len = 1;
	switch (*p) {
	case 'h':
		return 3600000;
	case 'm':
		return 60000;
	case 's':
		return 1000;
	default:
		return 0;
	}
}

/* Digits at *p into *v (overflow: -1); the number of digits. */
static int digits(const char **p, int64_t *v, int64_t *scale)
{
	int n = 0;

	*v = 0;
	*scale = 1;
	while (isdigit((unsigned char)**p)) {
		if (*v > (DURATION_MAX - 9) / 10 || *scale > DURATION_MAX / 10)
			return -1;
		*v = *v * 10 + (**p - '0');
		*scale *= 10;
		(*p)++;
		n++;
	}
	return n;
}

int cli_duration_parse(const char *text, int64_t *ms)
{
	const char *p = text;
	int64_t total = 0, last_unit = INT64_MAX;
	int64_t whole, frac, scale, unit;
	size_t len;
	int nw, nf;

	if (text == NULL || *p == '\0')
		return -1;
	while (*p != '\0') {
		nw = digits(&p, &whole, &scale);
		if (nw < 0)
			return -1;
		frac = 0;
		scale = 1;
		nf = 0;
		if (*p == '.') {
			p++;
			nf = digits(&p, &frac, &scale);
			if (nf <= 0)
				return -1;
		}
		if (nw == 0 && nf == 0)
			return -1;
		if (*p == '\0' && p - text == nw && nf == 0) {
			*ms = whole; /* a bare whole number: milliseconds */
			return whole <= DURATION_MAX ? 0 : -1;
		}
		unit = unit_ms(p, &len);
		if (unit == 0 || unit >= last_unit)
			return -1; /* no unit, an unknown one, or out of order */
		last_unit = unit;
		p += len;
		if (whole > (DURATION_MAX - total) / unit)
			return -1;
		total += whole * unit;
		/* frac/scale of the unit must come to whole milliseconds */
		if (frac > 0) {
			if (scale > DURATION_MAX / unit || (frac * unit) % scale != 0)
				return -1;
			if (frac * unit / scale > DURATION_MAX - total)
				return -1;
			total += frac * unit / scale;
		}
	}
	*ms = total;
	return 0;
}

const char *cli_duration_format(int64_t ms, char *buf, size_t len)
{
	static const struct {
		int64_t ms;
		const char *unit;
	} units[] = { { 3600000, "h" }, { 60000, "m" }, { 1000, "s" } };
	size_t i;

	for (i = 0; ms != 0 && i < sizeof(units) / sizeof(units[0]); i++) {
		if (ms % units[i].ms == 0) {
			snprintf(buf, len, "%lld%s", (long long)(ms / units[i].ms), units[i].unit);
			return buf;
		}
	}
	if (ms == 0)
		snprintf(buf, len, "0");
	else
		snprintf(buf, len, "%lldms", (long long)ms);
	return buf;
}

/* One phrase for every way an option's value can be wrong (too small, too
 * big, not a number), naming the option as typed, the range --help states
 * and the value. */
int cli_option_count(const char *text, const char *what, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
		fprintf(stderr,
				"dlock: %s takes a whole number from %lld to %lld, not \"%s\""
				" (see dlock --help)\n",
				what, (long long)min, (long long)max, text);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_option_duration(const char *text, const char *what, int64_t min, int64_t max, int64_t *out)
{
	char lo[32], hi[32];
	int64_t v;
	int parsed = cli_duration_parse(text, &v) == 0;

	if (parsed && v >= min && v <= max) {
		*out = v;
		return 0;
	}
	fprintf(stderr,
			"dlock: %s takes a duration from %s to %s%s%s, not \"%s\" (see dlock "
			"--help)\n",
			what, cli_duration_format(min, lo, sizeof(lo)),
			cli_duration_format(max, hi, sizeof(hi)), parsed ? "" : ": ",
			parsed ? "" : CLI_DURATION_FORMS, text);
	return -1;
}
