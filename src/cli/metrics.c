/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --metrics-textfile PATH: the lock's figures (dlock_client_stats, summed
 * over the target's clients) in node_exporter's textfile format, for its
 * textfile collector. Written when the lock is taken and when dlock exits,
 * to PATH.tmp.<pid> and renamed over PATH, so that a scrape never reads
 * half a file. Every metric carries name="<lock name>"; a node's carry
 * node="host:port" too. A failure to write is said on stderr and changes
 * no exit status: the lock's work matters more than its figures.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"

/* One node's figures, summed over the clients that have it. */
typedef struct node_sum {
	const char *node;
	int up;
	dlock_stat_histogram rtt;
} node_sum;

typedef struct stats_sum {
	dlock_stats all; /* counters and histograms; its nodes unused */
	node_sum *nodes;
	size_t n;
} stats_sum;

static void add_histogram(dlock_stat_histogram *to, const dlock_stat_histogram *h)
{
	size_t i;

	to->count += h->count;
	to->sum_us += h->sum_us;
	for (i = 0; i < DLOCK_STAT_BUCKETS; i++)
		to->counts[i] += h->counts[i];
}

static int add_node(stats_sum *sum, const dlock_stat_node *n)
{
	size_t i;
	node_sum *grown;

	for (i = 0; i < sum->n; i++)
		if (strcmp(sum->nodes[i].node, n->node) == 0) {
			sum->nodes[i].up = sum->nodes[i].up && n->up;
			add_histogram(&sum->nodes[i].rtt, &n->rtt);
			return 0;
		}
	grown = realloc(sum->nodes, (sum->n + 1) * sizeof(*grown));
	if (grown == NULL)
		return -1;
	sum->nodes = grown;
	memset(&sum->nodes[sum->n], 0, sizeof(node_sum));
	sum->nodes[sum->n].node = n->node;
	sum->nodes[sum->n].up = n->up;
	add_histogram(&sum->nodes[sum->n].rtt, &n->rtt);
	sum->n++;
	return 0;
}

static void add_stats(stats_sum *sum, const dlock_stats *s)
{
	sum->all.acquired += s->acquired;
	sum->all.not_acquired += s->not_acquired;
	sum->all.failed += s->failed;
	sum->all.released += s->released;
	sum->all.lost += s->lost;
	sum->all.renewals += s->renewals;
	sum->all.renewal_failures += s->renewal_failures;
	sum->all.brain_splits += s->brain_splits;
	sum->all.held += s->held;
	add_histogram(&sum->all.wait, &s->wait);
	add_histogram(&sum->all.hold, &s->hold);
}

/* A label value: backslash, double quote and newline escaped. */
static void label_value(FILE *out, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(out, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

/* {name="...",node="..."} or {name="..."}, with `extra` (`le="..."`) last. */
static void labels(FILE *out, const char *name, const char *node, const char *extra)
{
	fputs("{name=\"", out);
	label_value(out, name);
	fputc('"', out);
	if (node != NULL) {
		fputs(",node=\"", out);
		label_value(out, node);
		fputc('"', out);
	}
	if (extra != NULL)
		fprintf(out, ",%s", extra);
	fputc('}', out);
}

static void family(FILE *out, const char *metric, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", metric, help, metric, type);
}

static void sample(FILE *out, const char *metric, const char *name, const char *node,
		unsigned long long v)
{
	fputs(metric, out);
	labels(out, name, node, NULL);
	fprintf(out, " %llu\n", v);
}

static void counter(FILE *out, const char *metric, const char *help, const char *name,
		uint64_t v)
{
	family(out, metric, "counter", help);
	sample(out, metric, name, NULL, (unsigned long long)v);
}

/* The buckets cumulative, as Prometheus has them; the last is +Inf == _count. */
static void histogram_samples(FILE *out, const char *metric, const char *name, const char *node,
		const dlock_stat_histogram *h)
{
	unsigned long long cumulative = 0;
	char m[128], le[48];
	size_t i;

	snprintf(m, sizeof(m), "%s_bucket", metric);
	for (i = 0; i < DLOCK_STAT_BUCKETS; i++) {
		cumulative += h->counts[i];
		if (i + 1 < DLOCK_STAT_BUCKETS)
			snprintf(le, sizeof(le), "le=\"%.6g\"", (double)dlock_stat_bounds_us()[i] / 1e6);
		else
			snprintf(le, sizeof(le), "le=\"+Inf\"");
		fputs(m, out);
		labels(out, name, node, le);
		fprintf(out, " %llu\n", cumulative);
	}
	fprintf(out, "%s_sum", metric);
	labels(out, name, node, NULL);
	fprintf(out, " %.6f\n", (double)h->sum_us / 1e6);
	snprintf(m, sizeof(m), "%s_count", metric);
	sample(out, m, name, node, (unsigned long long)h->count);
}

static void write_all(FILE *out, const char *name, const stats_sum *s)
{
	size_t i;

	counter(out, "dlock_acquired_total", "Acquisitions that took the lock.", name,
			s->all.acquired);
	counter(out, "dlock_not_acquired_total",
			"Acquisitions that ended with the lock held by others.", name,
			s->all.not_acquired);
	counter(out, "dlock_acquire_failures_total",
			"Acquisitions that failed otherwise (too few nodes, errors).", name,
			s->all.failed);
	counter(out, "dlock_released_total", "Holds released.", name, s->all.released);
	counter(out, "dlock_lost_total", "Holds lost while held.", name, s->all.lost);
	counter(out, "dlock_renewals_total", "Renewals that kept a hold.", name, s->all.renewals);
	counter(out, "dlock_renewal_failures_total", "Renewals that did not get through.", name,
			s->all.renewal_failures);
	counter(out, "dlock_brain_splits_total",
			"Locks believed held that a node showed held by another owner.", name,
			s->all.brain_splits);
	family(out, "dlock_held", "gauge", "Holds now.");
	sample(out, "dlock_held", name, NULL, (unsigned long long)s->all.held);
	family(out, "dlock_wait_seconds", "histogram",
			"Time from asking for the lock to the outcome, acquired or not.");
	histogram_samples(out, "dlock_wait_seconds", name, NULL, &s->all.wait);
	family(out, "dlock_hold_seconds", "histogram", "Time a released or lost hold was held.");
	histogram_samples(out, "dlock_hold_seconds", name, NULL, &s->all.hold);
	family(out, "dlock_node_rtt_seconds", "histogram",
			"Round trip of each command a node answered.");
	for (i = 0; i < s->n; i++)
		histogram_samples(out, "dlock_node_rtt_seconds", name, s->nodes[i].node,
				&s->nodes[i].rtt);
	family(out, "dlock_node_up", "gauge", "1 when the node's last command got a reply.");
	for (i = 0; i < s->n; i++)
		sample(out, "dlock_node_up", name, s->nodes[i].node,
				(unsigned long long)s->nodes[i].up);
}

int cli_metrics_write(const cli_target *t, const char *path)
{
	static int reported;
	dlock_stats **snap;
	stats_sum sum;
	char tmp[4096];
	FILE *out = NULL;
	size_t i, j;
	int rc = -1, err = 0;

	if (path == NULL || t->clients == NULL)
		return 0;
	memset(&sum, 0, sizeof(sum));
	snap = calloc(t->n ? t->n : 1, sizeof(*snap));
	if (snap == NULL)
		goto done;
	for (i = 0; i < t->n; i++) {
		if (t->clients[i] == NULL || dlock_client_stats(&snap[i], t->clients[i]) < 0)
			continue;
		add_stats(&sum, snap[i]);
		for (j = 0; j < snap[i]->nnodes; j++)
			if (add_node(&sum, &snap[i]->nodes[j]) < 0)
				goto done;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	if ((out = fopen(tmp, "w")) == NULL) {
		err = errno;
		goto done;
	}
	write_all(out, t->name, &sum);
	if (fflush(out) != 0 || ferror(out))
		err = errno ? errno : EIO;
	if (fclose(out) != 0 && err == 0)
		err = errno;
	out = NULL;
	if (err == 0 && rename(tmp, path) != 0)
		err = errno;
	if (err != 0)
		unlink(tmp);
	else
		rc = 0;
done:
	if (rc < 0 && !reported) { /* once: the write at exit would say it again */
		fprintf(stderr,
				"dlock: --metrics-textfile %s: not written: %s (the directory must exist "
				"and be writable)\n",
				path, strerror(err ? err : ENOMEM));
		reported = 1;
	}
	for (i = 0; snap != NULL && i < t->n; i++)
		dlock_stats_free(snap[i]);
	free(snap);
	free(sum.nodes);
	return rc;
}
