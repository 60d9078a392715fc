/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock latch`: set, count down, read and wait for a countdown latch that
 * Java services share through Redisson's RCountDownLatch - e.g. a deploy
 * step that waits until N workers have drained:
 *
 *   dlock latch set drained 3;  (each worker) dlock latch down drained
 *   dlock latch wait -w 60000 drained && ./switch-traffic.sh
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "latch.h"

__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "dlock: latch: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see dlock help latch)\n");
	return EXIT_USAGE;
}

/* A whole number from min to max; -1 when text is not one. */
static int parse_num(const char *text, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

typedef struct latch_args {
	const char *verb, *name;
	int64_t wait_ms, count;
	int missing_ok; /* --missing-ok: no latch reads as zero (Redisson's view) */
} latch_args;

/* [-w DUR | --wait DUR] [--missing-ok] NAME [COUNT]: 0 or EXIT_USAGE. */
static int parse_args(latch_args *la, int argc, char **argv)
{
	int i = 0, want_count = strcmp(la->verb, "set") == 0;

	if (strcmp(la->verb, "set") != 0 && strcmp(la->verb, "down") != 0 &&
			strcmp(la->verb, "count") != 0 && strcmp(la->verb, "wait") != 0)
		return usage("unknown verb \"%s\": use set, down, count or wait", la->verb);
	for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i += 2) {
		if (strcmp(argv[i], "--missing-ok") == 0 && strcmp(la->verb, "set") != 0) {
			la->missing_ok = 1;
			i--; /* no value */
			continue;
		}
		if (strcmp(argv[i], "-w") != 0 && strcmp(argv[i], "--wait") != 0)
			return usage("%s does not take %s", la->verb, argv[i]);
		if (strcmp(la->verb, "wait") != 0)
			return usage("%s does not take %s (it is for wait)", la->verb, argv[i]);
		if (i + 1 >= argc)
			return usage("option %s needs a value", argv[i]);
		if (cli_option_duration(argv[i + 1], argv[i], 0, INT_MAX, &la->wait_ms) < 0)
			return EXIT_USAGE;
	}
	if (i >= argc || argv[i][0] == '\0')
		return usage("%s: the latch NAME is missing or empty", la->verb);
	la->name = argv[i++];
	if (want_count) {
		if (i >= argc || parse_num(argv[i], 1, INT64_MAX, &la->count) < 0)
			return usage("set needs a COUNT of 1 or more after NAME%s%s%s",
					i < argc ? " (not \"" : "", i < argc ? argv[i] : "",
					i < argc ? "\")" : "");
		i++;
	}
	if (i < argc)
		return usage("unexpected argument \"%s\"", argv[i]);
	return 0;
}

/* "dlock: latch VERB: <the latch's message>" and the exit status for rc. */
static int failed(const latch_args *la, const dlock_countdown *l, const cli_config *cfg, int rc)
{
	fprintf(stderr, "dlock: latch %s: %s\n", la->verb, cli_hint(dlock_countdown_errmsg(l)));
	return cli_exit_for(rc, cfg);
}

/* A latch that is not there: a typo must not pass the barrier (exit 1). */
static int missing(const latch_args *la, const dlock_countdown *l)
{
	fprintf(stderr,
			"dlock: latch %s: no latch \"%s\" (never set, deleted, or opened over a "
			"day ago); --missing-ok takes it as zero\n",
			la->verb, dlock_countdown_name(l));
	return 1;
}

/* wait: 0 at zero, 75 when the wait ran out with the count above zero;
 * 1 when there was no latch to wait for (unless --missing-ok). */
static int wait_zero(const latch_args *la, dlock_countdown *l, const cli_config *cfg)
{
	int64_t n = 0;
	int rc;

	if (!la->missing_ok) {
		if ((rc = dlock_countdown_count(&n, l)) < 0)
			return failed(la, l, cfg, rc);
		if (n < 0)
			return missing(la, l);
	}
	rc = dlock_countdown_await(l, la->wait_ms);

	if (rc != DLOCK_ETIMEDOUT)
		return rc == 0 ? 0 : failed(la, l, cfg, rc);
	/* Out of time: with the count above zero (75), or on a server that
	 * stopped answering (69) - the count tells which. */
	if (dlock_countdown_count(&n, l) < 0)
		return failed(la, l, cfg, DLOCK_ETIMEDOUT);
	if (n <= 0) /* reached zero (deleted) as the wait ended */
		return 0;
	if (!cfg->quiet)
		fprintf(stderr, "dlock: latch wait: \"%s\" still counts %lld after %lld ms\n", la->name,
			(long long)n, (long long)la->wait_ms);
	return EXIT_CONFLICT;
}

static int run_verb(const latch_args *la, dlock_countdown *l, const cli_config *cfg)
{
	int64_t n = 0;
	int set = 0, rc;

	if (strcmp(la->verb, "wait") == 0)
		return wait_zero(la, l, cfg);
	if (strcmp(la->verb, "set") == 0) {
		if ((rc = dlock_countdown_try_set_count(&set, l, la->count)) < 0)
			return failed(la, l, cfg, rc);
		if (!set) {
			fprintf(stderr,
					"dlock: latch set: \"%s\" exists already (it can be set "
					"again once it reached zero)\n",
					la->name);
			return 1;
		}
		printf("%lld\n", (long long)la->count);
		return 0;
	}
	rc = strcmp(la->verb, "down") == 0 ? dlock_countdown_count_down(&n, l)
					   : dlock_countdown_count(&n, l);
	if (rc < 0)
		return failed(la, l, cfg, rc);
	if (n < 0 && !la->missing_ok)
		return missing(la, l);
	if (n < 0)
		n = 0;
	printf("%lld\n", (long long)n); /* for scripts: LEFT=$(dlock latch down NAME) */
	return 0;
}

int cli_latch(const cli_config *cfg, const char *verb, int64_t wait_ms, int argc, char **argv)
{
	latch_args la = { verb, NULL, wait_ms, 0, 0 };
	dlock_countdown_options o = DLOCK_COUNTDOWN_OPTIONS_INIT;
	dlock_countdown *l = NULL;
	cli_target t;
	int rc, status;

	if ((status = parse_args(&la, argc, argv)) != 0)
		return status;
	if (cfg->n != 1)
		return usage("a latch is one key on one node (or one cluster), not %zu nodes",
				cfg->n);
	/* The client as every command opens it (timeouts, TLS, passwords). */
	rc = cli_target_open(&t, cfg, la.name);
	o.report_missing = 1; /* told apart here: exit 1, or --missing-ok */
	if (rc == 0)
		rc = dlock_countdown_new(&l, t.clients[0], la.name, &o);
	if (rc < 0) {
		char why[1024];

		fprintf(stderr, "dlock: latch %s: %s\n", verb,
				cli_target_open_errmsg(&t, cfg, why, sizeof(why)));
		cli_target_close(&t);
		return rc == DLOCK_EINVAL ? EXIT_USAGE : EXIT_UNAVAILABLE;
	}
	status = run_verb(&la, l, cfg);
	dlock_countdown_free(l);
	cli_target_close(&t);
	return status;
}
