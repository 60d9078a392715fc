/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * run --metrics-textfile PATH: node_exporter's textfile format, written
 * once the lock is held and again at exit, atomically. Every line parses
 * as `metric{labels} value`, the counters say what happened, and each
 * histogram's buckets are cumulative up to +Inf, which equals its _count.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"

TestSuite(cli_metrics, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

static char *slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n;

	cr_assert_not_null(f, "%s was not written", path);
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Every line a comment (# HELP / # TYPE) or `metric{labels} value`, each
 * label name="..."; every sample carries name="<lock>". */
static void expect_parses(char *text, const char *lock)
{
	char want[128], *save = NULL, copy[65536];

	snprintf(copy, sizeof copy, "%s", text);
	snprintf(want, sizeof want, "name=\"%s\"", lock);
	for (char *l = strtok_r(copy, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
		char metric[128], labels[512], value[64], rest[8];

		if (l[0] == '#') {
			cr_expect(strncmp(l, "# HELP dlock_", 13) == 0 ||
							strncmp(l, "# TYPE dlock_", 13) == 0,
					"comment: %s", l);
			continue;
		}
		int n = sscanf(l, "%127[a-z_]{%511[^}]} %63s %7s", metric, labels, value, rest);
		cr_expect_eq(n, 3, "not `metric{labels} value`: %s", l);
		char *end;
		strtod(value, &end);
		cr_expect(*end == '\0', "value %s of %s", value, l);
		cr_expect(strstr(labels, want) == labels, "%s without %s first", l, want);
	}
}

/* The value of the sample that starts with `prefix` (the whole name and labels). */
static double value_of(const char *text, const char *prefix)
{
	char line[256];

	snprintf(line, sizeof line, "\n%s ", prefix);
	const char *at = strstr(text, line);
	cr_assert_not_null(at, "no %s in:\n%s", prefix, text);
	return strtod(at + strlen(line), NULL);
}

/* metric's buckets (with extra labels before le) are cumulative; +Inf == _count. */
static void expect_histogram(const char *text, const char *metric, const char *labels)
{
	char pat[256], sample[256];
	double last = 0, inf = -1;
	int buckets = 0;

	snprintf(pat, sizeof pat, "\n%s_bucket{%s,le=\"", metric, labels);
	for (const char *at = strstr(text, pat); at != NULL; at = strstr(at + 1, pat)) {
		const char *le = at + strlen(pat);
		const char *v = strstr(le, "} ");
		double c = strtod(v + 2, NULL);

		cr_expect(c >= last, "%s: bucket le=%.*s has %g after %g", metric,
				(int)(v - le - 1), le, c, last);
		last = c;
		buckets++;
		if (strncmp(le, "+Inf\"", 5) == 0)
			inf = c;
	}
	cr_expect_eq(buckets, 21, "%s: %d buckets", metric, buckets);
	snprintf(sample, sizeof sample, "%s_count{%s}", metric, labels);
	cr_expect_eq(inf, value_of(text, sample), "%s: +Inf %g, _count %g", metric, inf,
			value_of(text, sample));
	snprintf(sample, sizeof sample, "%s_sum{%s}", metric, labels);
	cr_expect_geq(value_of(text, sample), 0);
}

static int leftovers(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d != NULL && (e = readdir(d)) != NULL)
		n += strstr(e->d_name, ".tmp.") != NULL;
	if (d != NULL)
		closedir(d);
	return n;
}

Test(cli_metrics, a_run_writes_its_figures_when_held_and_at_exit)
{
	const char *uri = rh_server_uri(dl_srv);
	char dir[64], path[128], during[128], script[512], node[128];
	proc *p;

	make_tmpdir(dir, sizeof dir);
	snprintf(path, sizeof path, "%s/dlock.prom", dir);
	snprintf(during, sizeof during, "%s/during.prom", dir);
	snprintf(script, sizeof script, "cp %s %s", path, during);
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "--metrics-textfile", path, "nightly", "--",
			"sh", "-c", script);
	EXPECT_STATUS(p, 0);
	proc_free(p);

	/* While held. */
	char *text = slurp(during);
	expect_parses(text, "nightly");
	cr_expect_eq(value_of(text, "dlock_acquired_total{name=\"nightly\"}"), 1, "%s", text);
	cr_expect_eq(value_of(text, "dlock_held{name=\"nightly\"}"), 1, "%s", text);

	/* At exit. */
	text = slurp(path);
	expect_parses(text, "nightly");
	cr_expect(strncmp(text, "# HELP dlock_acquired_total ", 28) == 0, "%s", text);
	cr_expect_eq(value_of(text, "dlock_acquired_total{name=\"nightly\"}"), 1, "%s", text);
	cr_expect_eq(value_of(text, "dlock_not_acquired_total{name=\"nightly\"}"), 0);
	cr_expect_eq(value_of(text, "dlock_released_total{name=\"nightly\"}"), 1, "%s", text);
	cr_expect_eq(value_of(text, "dlock_lost_total{name=\"nightly\"}"), 0);
	cr_expect_eq(value_of(text, "dlock_brain_splits_total{name=\"nightly\"}"), 0);
	cr_expect_eq(value_of(text, "dlock_renewal_failures_total{name=\"nightly\"}"), 0);
	cr_expect_geq(value_of(text, "dlock_renewals_total{name=\"nightly\"}"), 0);
	cr_expect_eq(value_of(text, "dlock_held{name=\"nightly\"}"), 0, "%s", text);
	expect_histogram(text, "dlock_wait_seconds", "name=\"nightly\"");
	cr_expect_eq(value_of(text, "dlock_wait_seconds_count{name=\"nightly\"}"), 1);
	expect_histogram(text, "dlock_hold_seconds", "name=\"nightly\"");
	cr_expect_eq(value_of(text, "dlock_hold_seconds_count{name=\"nightly\"}"), 1);
	snprintf(node, sizeof node, "name=\"nightly\",node=\"%s\"", uri + 8);
	expect_histogram(text, "dlock_node_rtt_seconds", node);
	char up[192];
	snprintf(up, sizeof up, "dlock_node_up{%s}", node);
	cr_expect_eq(value_of(text, up), 1, "%s", text);
	cr_expect(strstr(text, "# TYPE dlock_wait_seconds histogram\n") != NULL);
	cr_expect_eq(leftovers(dir), 0, "a temporary file was left in %s", dir);
	remove_tmpdir(dir, ARGS("dlock.prom", "during.prom"));
}

Test(cli_metrics, a_busy_run_counts_not_acquired)
{
	const char *uri = rh_server_uri(dl_srv);
	char dir[64], path[128];
	proc *p;

	make_tmpdir(dir, sizeof dir);
	snprintf(path, sizeof path, "%s/busy.prom", dir);
	p = DLOCK("-n", uri, "acquire", "-l", "20s", "--owner", "other:1", "busy");
	ASSERT_STATUS(p, 0);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-w", "0", "--metrics-textfile", path, "busy",
			"--", "true");
	EXPECT_STATUS(p, 75);
	proc_free(p);
	char *text = slurp(path);
	expect_parses(text, "busy");
	cr_expect_eq(value_of(text, "dlock_acquired_total{name=\"busy\"}"), 0, "%s", text);
	cr_expect_eq(value_of(text, "dlock_not_acquired_total{name=\"busy\"}"), 1, "%s", text);
	cr_expect_eq(value_of(text, "dlock_held{name=\"busy\"}"), 0);
	expect_histogram(text, "dlock_wait_seconds", "name=\"busy\"");
	remove_tmpdir(dir, ARGS("busy.prom"));
}
