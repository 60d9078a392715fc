/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The command line's durations (src/cli/duration.c): what a cron line or a
 * script writes, what it means in milliseconds, and the forms refused.
 */
#include <stdint.h>

#include <criterion/criterion.h>

#include "duration.h"

static void check_ms(const char *text, int64_t want)
{
	int64_t got = -12345;

	cr_expect_eq(cli_duration_parse(text, &got), 0, "\"%s\" refused", text);
	cr_expect_eq(got, want, "\"%s\" is %lld ms, expected %lld", text, (long long)got,
			(long long)want);
}

static void check_refused(const char *text)
{
	int64_t got = -12345;

	cr_expect_eq(cli_duration_parse(text, &got), -1, "\"%s\" accepted (%lld ms)", text,
			(long long)got);
	cr_expect_eq(got, -12345, "\"%s\": *ms written though refused", text);
}

Test(duration, bare_numbers_stay_milliseconds)
{
	check_ms("0", 0);
	check_ms("1500", 1500);
	check_ms("2147483647", 2147483647);
	check_ms("007", 7);
}

Test(duration, each_unit)
{
	check_ms("250ms", 250);
	check_ms("30s", 30000);
	check_ms("5m", 300000);
	check_ms("1h", 3600000);
	check_ms("0s", 0);
}

Test(duration, fractions_that_come_to_whole_milliseconds)
{
	check_ms("1.5s", 1500);
	check_ms(".5s", 500);
	check_ms("0.25s", 250);
	check_ms("1.5m", 90000);
	check_ms("0.001s", 1);
	check_ms("2.50h", 9000000);
	check_ms("1.0ms", 1);
}

Test(duration, parts_from_larger_to_smaller_units)
{
	check_ms("2h30m", 9000000);
	check_ms("1m30s", 90000);
	check_ms("1s500ms", 1500);
	check_ms("1h0m5s", 3605000);
}

Test(duration, refused_forms)
{
	const char *bad[] = { "", "s", "ms", "-5", "-5s", "+5", "5x", "5 s", " 5s", "5s ", "1.5",
		"1.s", ".s", "1..5s", "0.0001s", "1.5ms", "1h30", "30m2h", "1m1m", "1s1s", "5S",
		"5sec", "1e3", "0x10", "9223372036854775807", "99999999999999999999h" };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_refused(bad[i]);
}

/* A range as --help and the messages state it: the largest whole unit, and
 * read back by the parser as the same number of milliseconds. */
Test(duration, ranges_are_written_as_help_writes_them)
{
	static const struct {
		int64_t ms;
		const char *text;
	} cases[] = { { 0, "0" }, { 1, "1ms" }, { 300, "300ms" }, { 1500, "1500ms" },
		{ 90000, "90s" }, { 1000, "1s" }, { 300000, "5m" }, { 86400000, "24h" },
		{ 2147483647, "2147483647ms" } };
	char buf[32];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t back = -1;

		cr_expect_str_eq(cli_duration_format(cases[i].ms, buf, sizeof(buf)), cases[i].text);
		cr_expect_eq(cli_duration_parse(buf, &back), 0, "\"%s\" not read back", buf);
		cr_expect_eq(back, cases[i].ms, "\"%s\" read back as %lld", buf, (long long)back);
	}
}
