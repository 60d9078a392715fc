/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock status --watch NAME`: status again every interval until SIGINT or
 * SIGTERM (exit 0). On a terminal the screen is redrawn (as watch(1)
 * does); into a pipe or a file, one line per change with a UTC timestamp -
 * a holder that came or went, the number waiting, a node that became
 * unreachable or reachable - and nothing while nothing changes, so that a
 * log of it reads as the lock's history. The first round reports what it
 * finds as changes from a free lock on reachable nodes.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "status.h"

static volatile sig_atomic_t watch_stop;

static void on_stop(int sig)
{
	(void)sig;
	watch_stop = 1;
}

/* What the last round saw of one node. */
typedef struct seen {
	int reachable;
	char **holders;
	size_t n;
	int64_t waiting;
} seen;

static void seen_clear(seen *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		free(s->holders[i]);
	free(s->holders);
	s->holders = NULL;
	s->n = 0;
}

/* "2026-11-27T03:25:01.123Z" */
static const char *stamp(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
			tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			(int)(ts.tv_nsec / 1000000) % 1000);
	return buf;
}

static int has(char *const *list, size_t n, const char *s)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (list[i] != NULL && strcmp(list[i], s) == 0)
			return 1;
	return 0;
}

/* Node i's changes since *s, printed, and *s brought up to date. */
static void report_node(cli_target *t, size_t i, const node_view *v, seen *s, FILE *out)
{
	const char *node = dlock_client_node(t->clients[i]);
	size_t j, n = cli_view_holders(v);
	char when[64], who[768];
	char **now;

	stamp(when, sizeof(when));
	if (v->reachable != s->reachable) {
		if (v->reachable)
			fprintf(out, "%s %s reachable\n", when, node);
		else
			fprintf(out, "%s %s unreachable: %s\n", when, node, v->error);
		s->reachable = v->reachable;
	}
	/* What an unreachable node holds is unknown, not changed. */
	if (!v->reachable || v->rc < 0)
		return;
	now = calloc(n ? n : 1, sizeof(*now));
	if (now == NULL)
		return;
	for (j = 0; j < n; j++)
		now[j] = strdup(cli_view_holder(v, j));
	for (j = 0; j < s->n; j++)
		if (s->holders[j] != NULL && !has(now, n, s->holders[j]))
			fprintf(out, "%s %s no longer held by %s\n", when, node, s->holders[j]);
	for (j = 0; j < n; j++)
		if (now[j] != NULL && !has(s->holders, s->n, now[j]))
			fprintf(out, "%s %s held by %s\n", when, node,
					cli_holder_describe(t->clients[i], now[j], who, sizeof(who)));
	seen_clear(s);
	s->holders = now;
	s->n = n;
	if (cli_view_waiting(v) != s->waiting) {
		fprintf(out, "%s %s %lld %s (was %lld)\n", when, node,
				(long long)cli_view_waiting(v), cli_view_waiting_words(v),
				(long long)s->waiting);
		s->waiting = cli_view_waiting(v);
	}
}

/* The terminal's picture: a header with the time, then status's table. */
static void redraw(cli_target *t, int64_t interval_ms, const node_view *v, const status_counts *c,
		FILE *out)
{
	char when[64];

	fputs("\033[H\033[2J", out);
	fprintf(out, "Every %lld.%03llds: dlock status %s%*s%s\n\n", (long long)interval_ms / 1000,
			(long long)interval_ms % 1000, t->name, 4, "", stamp(when, sizeof(when)));
	cli_status_print_table(t, v, c, out);
}

/* Sleep until `ms` passed or a stop signal came, in short steps: the signal
 * may land on one of the library's threads and interrupt no sleep here. */
static void pause_ms(int64_t ms)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!watch_stop) {
		int64_t left;
		struct timespec step;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = ms - ((now.tv_sec - start.tv_sec) * 1000 +
					    (now.tv_nsec - start.tv_nsec) / 1000000);
		if (left <= 0)
			return;
		left = left > 100 ? 100 : left;
		step.tv_sec = 0;
		step.tv_nsec = (long)left * 1000000;
		nanosleep(&step, NULL);
	}
}

int cli_status_watch(cli_target *t, int64_t interval_ms, FILE *out)
{
	int tty = isatty(fileno(out)), status;
	node_view *v = calloc(t->n, sizeof(*v));
	seen *s = calloc(t->n, sizeof(*s));
	struct sigaction sa;
	status_counts c;
	size_t i;

	if (v == NULL || s == NULL) {
		free(v);
		free(s);
		return EXIT_UNAVAILABLE;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (i = 0; i < t->n; i++)
		s[i].reachable = 1;
	status = 0;
	while (!watch_stop) {
		cli_status_read(t, v, &c);
		if ((status = cli_status_refuse_twice(t)) != 0)
			break;
		if (tty)
			redraw(t, interval_ms, v, &c, out);
		else
			for (i = 0; i < t->n; i++)
				report_node(t, i, &v[i], &s[i], out);
		fflush(out);
		cli_status_free(t, v);
		pause_ms(interval_ms);
	}
	cli_status_free(t, v);
	for (i = 0; i < t->n; i++)
		seen_clear(&s[i]);
	free(v);
	free(s);
	return status;
}
