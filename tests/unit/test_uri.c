/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redis:// URI parsing: the valid forms with every field checked, the
 * malformed ones with their promise (DLOCK_EINVAL, a one-line message that
 * never quotes the password, *out left zeroed), allocation failures, and a
 * deterministic mutation "fuzz" run.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "dlock/common.h"
#include "dlock/errors.h"
#include "core/net/uri.h"

static int is_zeroed(const dlock__uri *u)
{
	static const dlock__uri zero;

	return memcmp(u, &zero, sizeof zero) == 0;
}

static void assert_opt_str(const char *field, const char *got, const char *want, const char *text)
{
	if (want == NULL)
		cr_assert_null(got, "%s: %s should be NULL", text, field);
	else {
		cr_assert_not_null(got, "%s: %s should be \"%s\"", text, field, want);
		cr_assert_str_eq(got, want, "%s: %s", text, field);
	}
}

static void check_ok(const char *text, const char *user, const char *password, const char *host,
		int port, int db)
{
	dlock__uri u;
	char err[256];
	int rc;

	memset(&u, 0xa5, sizeof u);
	strcpy(err, "stale");
	rc = dlock__uri_parse(&u, text, err, sizeof err);
	cr_assert_eq(rc, 0, "%s: rc %d (%s)", text, rc, err);
	cr_assert_str_empty(err, "%s: err should be cleared on success", text);
	assert_opt_str("user", u.user, user, text);
	assert_opt_str("password", u.password, password, text);
	assert_opt_str("host", u.host, host, text);
	cr_assert_eq(u.port, port, "%s: port %d", text, u.port);
	cr_assert_eq(u.db, db, "%s: db %d", text, u.db);
	dlock__uri_clear(&u);
	cr_assert(is_zeroed(&u), "%s: clear must zero the struct", text);
}

/*
 * `secret`, when given, is text of the URI's userinfo that must not appear
 * in the message; `want` is a fragment the message must contain.
 */
static void check_bad(const char *text, const char *secret, const char *want)
{
	dlock__uri u;
	char err[256];
	int rc;

	memset(&u, 0xa5, sizeof u);
	err[0] = '\0';
	rc = dlock__uri_parse(&u, text, err, sizeof err);
	cr_assert_eq(rc, DLOCK_EINVAL, "\"%s\": rc %d, want DLOCK_EINVAL", text ? text : "(null)",
			rc);
	cr_assert(is_zeroed(&u), "\"%s\": *out must be zeroed on failure", text ? text : "(null)");
	cr_assert(err[0] != '\0', "\"%s\": empty message", text ? text : "(null)");
	cr_assert_null(strchr(err, '\n'), "message must be one line: %s", err);
	if (secret != NULL)
		cr_assert_null(strstr(err, secret), "message leaks the password: %s", err);
	if (want != NULL)
		cr_assert_not_null(strstr(err, want), "message \"%s\" should mention \"%s\"", err,
				want);
}

/*
 * The cases, one row each, tagged with the Test that runs them: adding a
 * case is one line, and each Test keeps its name and its own cases.
 */
typedef struct ok_case {
	const char *test;
	const char *text, *user, *password, *host;
	int port, db;
} ok_case;

static const ok_case ok_cases[] = {
	{ "defaults", "redis://localhost", NULL, NULL, "localhost", 6379, 0 },
	{ "defaults", "redis://h", NULL, NULL, "h", 6379, 0 },
	{ "defaults", "redis://127.0.0.1", NULL, NULL, "127.0.0.1", 6379, 0 },
	{ "port", "redis://127.0.0.1:6380", NULL, NULL, "127.0.0.1", 6380, 0 },
	{ "port", "redis://h:1", NULL, NULL, "h", 1, 0 },
	{ "port", "redis://h:65535", NULL, NULL, "h", 65535, 0 },
	{ "port", "redis://h:06379", NULL, NULL, "h", 6379, 0 },
	{ "db", "redis://h/0", NULL, NULL, "h", 6379, 0 },
	{ "db", "redis://h/15", NULL, NULL, "h", 6379, 15 },
	{ "db", "redis://h:6380/7", NULL, NULL, "h", 6380, 7 },
	{ "db", "redis://h/2147483647", NULL, NULL, "h", 6379, 2147483647 },
	{ "db", "redis://h/000000000012", NULL, NULL, "h", 6379, 12 },
	{ "trailing_slash", "redis://h/", NULL, NULL, "h", 6379, 0 },
	{ "trailing_slash", "redis://h:6380/", NULL, NULL, "h", 6380, 0 },
	{ "trailing_slash", "redis://[::1]/", NULL, NULL, "::1", 6379, 0 },
	{ "scheme_case_insensitive", "REDIS://Host.Example-1_a", NULL, NULL, "Host.Example-1_a",
			6379, 0 },
	{ "scheme_case_insensitive", "Redis://h:7000/3", NULL, NULL, "h", 7000, 3 },
	{ "user_and_password", "redis://alice:s3cret@host:6390/2", "alice", "s3cret", "host", 6390,
			2 },
	{ "user_and_password", "redis://alice:s3cret@host", "alice", "s3cret", "host", 6379, 0 },
	{ "password_only", "redis://:pw@host", NULL, "pw", "host", 6379, 0 },
	{ "password_only", "redis://:pw@host:1/1", NULL, "pw", "host", 1, 1 },
	{ "empty_password_is_real", "redis://alice:@host", "alice", "", "host", 6379, 0 },
	{ "empty_password_is_real", "redis://:@host", NULL, "", "host", 6379, 0 },
	{ "percent_encoded", "redis://u:p%40ss%3Aw%2Ford@host", "u", "p@ss:w/ord", "host", 6379,
			0 },
	{ "percent_encoded", "redis://:%2f%3a%40@host", NULL, "/:@", "host", 6379, 0 },
	{ "percent_encoded", "redis://us%65r:x@h", "user", "x", "h", 6379, 0 },
	{ "percent_encoded", "redis://:%25%20%0a@h", NULL, "% \n", "h", 6379, 0 },
	{ "percent_encoded", "redis://%3Aodd:x@h", ":odd", "x", "h", 6379, 0 },
	/* The last '@' splits off the userinfo, so a password may carry '@', ':' and '/' raw. */
	{ "raw_specials_in_password", "redis://:p@ss@host", NULL, "p@ss", "host", 6379, 0 },
	{ "raw_specials_in_password", "redis://u:a:b:c@host", "u", "a:b:c", "host", 6379, 0 },
	{ "raw_specials_in_password", "redis://:p/ss@host/1", NULL, "p/ss", "host", 6379, 1 },
	{ "raw_specials_in_password", "redis://:@@@host", NULL, "@@", "host", 6379, 0 },
	{ "raw_specials_in_password", "redis://u:p?w#x@host", "u", "p?w#x", "host", 6379, 0 },
	{ "ipv6", "redis://[::1]", NULL, NULL, "::1", 6379, 0 },
	{ "ipv6", "redis://[::1]:6380/4", NULL, NULL, "::1", 6380, 4 },
	{ "ipv6", "redis://[2001:db8::1]", NULL, NULL, "2001:db8::1", 6379, 0 },
	{ "ipv6", "redis://[::ffff:192.0.2.1]:7000", NULL, NULL, "::ffff:192.0.2.1", 7000, 0 },
	{ "ipv6", "redis://u:p@[fe80::1]:1/9", "u", "p", "fe80::1", 1, 9 },
};

typedef struct bad_case {
	const char *test;
	const char *text;
	const char *secret; /* "": the URI has no password to hide */
	const char *want;
} bad_case;

static const bad_case bad_cases[] = {
	{ "scheme", "localhost:6379", "", "redis://" },
	{ "scheme", "//localhost", "", "redis://" },
	{ "scheme", "redis:/host", "", "redis://" },
	{ "scheme", "redis:host", "", "redis://" },
	{ "scheme", "redis//host", "", "redis://" },
	{ "scheme", "redi://host", "", "\"redi\"" },
	{ "scheme", "http://localhost", "", "\"http\"" },
	{ "scheme", "unixx:///tmp/redis.sock", "", "\"unixx\"" },
	{ "scheme", "redis+clustr://h", "", "\"redis+clustr\"" },
	/* Something that only contains "://" later is not quoted as a scheme. */
	{ "scheme", "u:hunter2@h://x", "hunter2", "redis://" },
	{ "tls", "rediss://", "", "empty host" },
	{ "tls", "REDISS://:hunter2@:6380", "hunter2", "empty host" },
	{ "empty_host", "redis://", "", "empty host" },
	{ "empty_host", "redis://:6379", "", "empty host" },
	{ "empty_host", "redis:///0", "", "empty host" },
	{ "empty_host", "redis://:hunter2@", "hunter2", "empty host" },
	{ "empty_host", "redis://:hunter2@:6379", "hunter2", "empty host" },
	{ "empty_host", "redis://u:hunter2@/1", "hunter2", "empty host" },
	{ "bad_host", "redis://ho$t", "", "'$'" },
	{ "bad_host", "redis://host,other", "", "host" },
	{ "bad_host", "redis://h\xc3\xa9", "", "0xc3" },
	{ "bad_host", "redis://ho%41st", "", "'%'" },
	{ "bad_host", "redis://::1", "", "brackets" },
	{ "bad_host", "redis://2001:db8::1", "", "brackets" },
	{ "bad_ipv6", "redis://[::1", "", "']'" },
	{ "bad_ipv6", "redis://[]", "", "empty IPv6" },
	{ "bad_ipv6", "redis://[zz::1]", "", "zz::1" },
	{ "bad_ipv6", "redis://[1.2.3.4]", "", "IPv6" },
	{ "bad_ipv6", "redis://[::1]x", "", "'x'" },
	{ "bad_ipv6", "redis://[::1]]", "", "']'" },
	{ "bad_ipv6", "redis://[::1]:", "", "empty port" },
	{ "bad_ipv6", "redis://[fe80::1%25eth0]", "", "IPv6" },
	{ "bad_ipv6", "redis://[0000:0000:0000:0000:0000:0000:0000:0000:0000]", "", "IPv6" },
	{ "port", "redis://host:", "", "empty port" },
	{ "port", "redis://host:/0", "", "empty port" },
	{ "port", "redis://host:0", "", "bad port \"0\" in URI (1..65535)" },
	{ "port", "redis://host:99999", "", "bad port \"99999\" in URI (1..65535)" },
	{ "port", "redis://host:65536", "", "\"65536\"" },
	{ "port", "redis://host:123456789012345678901234567890", "", "1..65535" },
	{ "port", "redis://host:4294967297", "", "1..65535" },
	{ "port", "redis://host:-1", "", "decimal" },
	{ "port", "redis://host:+80", "", "decimal" },
	{ "port", "redis://host:80x", "", "decimal" },
	{ "port", "redis://host:0x50", "", "decimal" },
	{ "port", "redis://host:6379:1", "", "decimal" },
	/* A forgotten '@' puts the password where the port goes; it must not be
	 * echoed back whether it looks numeric or not. */
	{ "password_in_port_position", "redis://user:hunter2", "hunter2", "port" },
	{ "password_in_port_position", "redis://user:31415926535", "31415926535", "port" },
	{ "password_in_port_position", "redis://user:hunter2/0", "hunter2", "port" },
	{ "db", "redis://host/abc", "", "db" },
	{ "db", "redis://host/-1", "", "negative db" },
	{ "db", "redis://host/+1", "", "db" },
	{ "db", "redis://host/2147483648", "", "\"2147483648\"" },
	{ "db", "redis://host/99999999999999999999999", "", "0..2147483647" },
	{ "db", "redis://host/1/", "", "'/'" },
	{ "db", "redis://host//", "", "db" },
	{ "db", "redis://host/1x", "", "'x'" },
	{ "db", "redis://host/0x1", "", "'x'" },
	{ "db", "redis://:hunter2@host:6380/db0", "hunter2", "db" },
	{ "query_and_fragment", "redis://host/0?timeout=1", "", "query" },
	{ "query_and_fragment", "redis://host?x", "", "query" },
	{ "query_and_fragment", "redis://:hunter2@host:1?db=2", "hunter2", "query" },
	{ "query_and_fragment", "redis://host#frag", "", "fragment" },
	{ "query_and_fragment", "redis://host/0#", "", "fragment" },
	{ "whitespace", "redis://ho st", "", "0x20" },
	{ "whitespace", "redis://host ", "", "0x20" },
	{ "whitespace", " redis://host", "", "0x20" },
	{ "whitespace", "redis://host:6379 /0", "", "0x20" },
	{ "whitespace", "redis://:hunter2 x@host", "hunter2", "userinfo" },
	{ "control_chars", "redis://host\n", "", "0x0a" },
	{ "control_chars", "redis://ho\tst", "", "0x09" },
	{ "control_chars", "redis://host\r\n", "", "0x0d" },
	{ "control_chars", "redis://host\x7f", "", "0x7f" },
	{ "control_chars", "redis://host/1\x1b", "", "0x1b" },
	/* Inside the userinfo neither the byte nor its position is reported. */
	{ "control_chars", "redis://:hunter2\x01x@host", "hunter2", "userinfo" },
	{ "control_chars", "redis://u\x02:hunter2@host", "hunter2", "userinfo" },
	{ "bad_percent_escape", "redis://:hunter2%4@host", "hunter2", "%-escape" },
	{ "bad_percent_escape", "redis://:hunter2%zz@host", "hunter2", "%-escape" },
	{ "bad_percent_escape", "redis://:hunter2%@host", "hunter2", "%-escape" },
	{ "bad_percent_escape", "redis://:%4hunter2@host", "hunter2", "%-escape" },
	{ "bad_percent_escape", "redis://:hunter2%g0@host", "hunter2", "%-escape" },
	{ "bad_percent_escape", "redis://us%G1:hunter2@host", "hunter2", "user name" },
	{ "bad_percent_escape", "redis://:hunter2%00@host", "hunter2", "%00" },
	{ "userinfo_without_colon", "redis://hunter2@host", "hunter2", "userinfo needs ':'" },
	{ "userinfo_without_colon", "redis://@host", "", "userinfo needs ':'" },
	{ "userinfo_without_colon", "redis://hun%40ter2@host:6380/1", "hun", "userinfo needs ':'" },
};

/* Every row of `test`; none at all would be a misspelt tag. */
static void check_ok_cases(const char *test)
{
	size_t i, ran = 0;

	for (i = 0; i < sizeof ok_cases / sizeof ok_cases[0]; i++) {
		const ok_case *k = &ok_cases[i];

		if (strcmp(k->test, test) == 0) {
			check_ok(k->text, k->user, k->password, k->host, k->port, k->db);
			ran++;
		}
	}
	cr_assert_gt(ran, 0, "no valid cases tagged %s", test);
}

static void check_bad_cases(const char *test)
{
	size_t i, ran = 0;

	for (i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
		const bad_case *k = &bad_cases[i];

		if (strcmp(k->test, test) == 0) {
			check_bad(k->text, k->secret[0] != '\0' ? k->secret : NULL, k->want);
			ran++;
		}
	}
	cr_assert_gt(ran, 0, "no malformed cases tagged %s", test);
}

#define VALID_TEST(name) \
	Test(uri_valid, name, .timeout = 10) \
	{ \
		check_ok_cases(#name); \
	}
#define MALFORMED_TEST(name) \
	Test(uri_invalid, name, .timeout = 10) \
	{ \
		check_bad_cases(#name); \
	}

/* The tests that are only their rows in the tables above. */
VALID_TEST(defaults)
VALID_TEST(scheme_case_insensitive)
VALID_TEST(port)
VALID_TEST(db)
VALID_TEST(trailing_slash)
VALID_TEST(user_and_password)
VALID_TEST(password_only)
VALID_TEST(empty_password_is_real)
VALID_TEST(percent_encoded)
VALID_TEST(raw_specials_in_password)
VALID_TEST(ipv6)
MALFORMED_TEST(scheme)
MALFORMED_TEST(tls)
MALFORMED_TEST(empty_host)
MALFORMED_TEST(bad_ipv6)
MALFORMED_TEST(port)
MALFORMED_TEST(password_in_port_position)
MALFORMED_TEST(db)
MALFORMED_TEST(query_and_fragment)
MALFORMED_TEST(whitespace)
MALFORMED_TEST(control_chars)
MALFORMED_TEST(bad_percent_escape)
MALFORMED_TEST(userinfo_without_colon)

/* ---- valid forms ---------------------------------------------------- */

Test(uri_valid, longest_input, .timeout = 10)
{
	/* Exactly 4096 bytes is allowed: "redis://:" + password + "@h". */
	char text[4097];
	size_t plen = 4096 - strlen("redis://:") - strlen("@h");

	strcpy(text, "redis://:");
	memset(text + 9, 'p', plen);
	strcpy(text + 9 + plen, "@h");
	cr_assert_eq(strlen(text), 4096);
	{
		dlock__uri u;
		char err[128];

		cr_assert_eq(dlock__uri_parse(&u, text, err, sizeof err), 0, "%s", err);
		cr_assert_eq(strlen(u.password), plen);
		cr_assert_str_eq(u.host, "h");
		dlock__uri_clear(&u);
	}
}

/* ---- malformed ------------------------------------------------------ */

Test(uri_invalid, null_and_empty, .timeout = 10)
{
	dlock__uri u;
	char err[128];

	check_bad(NULL, NULL, "NULL");
	check_bad("", NULL, "empty");
	err[0] = '\0';
	cr_assert_eq(dlock__uri_parse(NULL, "redis://h", err, sizeof err), DLOCK_EINVAL);
	cr_assert(err[0] != '\0');
	/* A NULL or zero-length message buffer is allowed and left alone. */
	memset(&u, 0xa5, sizeof u);
	cr_assert_eq(dlock__uri_parse(&u, "nope", NULL, 0), DLOCK_EINVAL);
	cr_assert(is_zeroed(&u));
	err[0] = 'X';
	cr_assert_eq(dlock__uri_parse(&u, "nope", err, 0), DLOCK_EINVAL);
	cr_assert_eq(err[0], 'X');
	cr_assert_eq(dlock__uri_parse(&u, "redis://h", NULL, 0), 0);
	dlock__uri_clear(&u);
}

Test(uri_invalid, message_truncates, .timeout = 10)
{
	dlock__uri u;
	char err[8];

	memset(err, 'X', sizeof err);
	cr_assert_eq(dlock__uri_parse(&u, "redis://h:0", err, sizeof err), DLOCK_EINVAL);
	cr_assert_eq(strlen(err), sizeof err - 1);
}

Test(uri_invalid, too_long, .timeout = 10)
{
	char *text = malloc(5001);

	cr_assert_not_null(text);
	strcpy(text, "redis://");
	memset(text + 8, 'a', 5000 - 8);
	text[5000] = '\0';
	check_bad(text, NULL, "4096");
	/* One byte over the limit, with a password that must not leak. */
	strcpy(text, "redis://:");
	memset(text + 9, 'S', 4096 - 9 - 2 + 1);
	strcpy(text + 4096 - 2 + 1, "@h");
	cr_assert_eq(strlen(text), 4097);
	check_bad(text, "SSSS", "4096");
	free(text);
}

Test(uri_invalid, bad_host, .timeout = 10)
{
	char text[300];

	check_bad_cases("bad_host");
	strcpy(text, "redis://");
	memset(text + 8, 'a', 256);
	text[8 + 256] = '\0';
	check_bad(text, NULL, "255");
}

/* ---- allocation failures -------------------------------------------- */

static int alloc_budget; /* allocations left before failing; < 0 means unlimited */
static int alloc_live;

static void *counting_malloc(size_t size)
{
	void *p;

	if (alloc_budget == 0)
		return NULL;
	if (alloc_budget > 0)
		alloc_budget--;
	p = malloc(size);
	if (p != NULL)
		alloc_live++;
	return p;
}

static void *counting_realloc(void *ptr, size_t size)
{
	return realloc(ptr, size);
}

static void counting_free(void *ptr)
{
	if (ptr != NULL)
		alloc_live--;
	free(ptr);
}

Test(uri_alloc, every_failure_point, .timeout = 10)
{
	static const dlock_allocator counting = { DLOCK_ALLOCATOR_VERSION, counting_malloc,
		counting_realloc, counting_free };
	static const char *const texts[] = {
		"redis://alice:s3cret@host:6390/2",
		"redis://:p%40w@[::1]/1",
		"redis://host",
	};
	size_t t;

	cr_assert_eq(dlock_set_allocator(&counting), 0);
	for (t = 0; t < sizeof texts / sizeof texts[0]; t++) {
		int budget, rc = DLOCK_ENOMEM;

		for (budget = 0; rc == DLOCK_ENOMEM; budget++) {
			dlock__uri u;
			char err[128];

			cr_assert_lt(budget, 20, "%s never succeeds", texts[t]);
			memset(&u, 0xa5, sizeof u);
			alloc_budget = budget;
			alloc_live = 0;
			rc = dlock__uri_parse(&u, texts[t], err, sizeof err);
			if (rc == DLOCK_ENOMEM) {
				cr_assert(is_zeroed(&u), "%s, budget %d", texts[t], budget);
				cr_assert_eq(alloc_live, 0, "%s, budget %d: leak", texts[t],
						budget);
				cr_assert(err[0] != '\0');
			} else {
				cr_assert_eq(rc, 0, "%s, budget %d: rc %d", texts[t], budget, rc);
				dlock__uri_clear(&u);
				cr_assert_eq(alloc_live, 0);
			}
		}
	}
	cr_assert_eq(dlock_set_allocator(NULL), 0);
}

Test(uri_misc, clear_is_idempotent, .timeout = 10)
{
	dlock__uri u;

	memset(&u, 0, sizeof u);
	dlock__uri_clear(&u);
	dlock__uri_clear(NULL);
	cr_assert_eq(dlock__uri_parse(&u, "redis://u:p@h", NULL, 0), 0);
	dlock__uri_clear(&u);
	dlock__uri_clear(&u);
	cr_assert(is_zeroed(&u));
}

/* ---- mutation fuzz -------------------------------------------------- */

/* xorshift64: fixed seed, so a failure replays exactly; rand() is banned. */
static uint64_t xs_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static size_t xs_below(uint64_t *s, size_t n)
{
	return (size_t)(xs_next(s) % n);
}

/* Bytes that change the meaning of a URI are the likeliest to find bugs. */
static unsigned char pick_byte(uint64_t *s)
{
	static const char special[] = "@:/[]%?#.-_0123456789aAfF \t\x7f";

	if (xs_below(s, 2) == 0)
		return (unsigned char)special[xs_below(s, sizeof special - 1)];
	return (unsigned char)(1 + xs_below(s, 255)); /* never NUL */
}

static void mutate(char *buf, size_t *len, size_t cap, uint64_t *s)
{
	size_t pos;

	switch (xs_below(s, 4)) {
	case 0: /* replace a byte */
		if (*len > 0)
			buf[xs_below(s, *len)] = (char)pick_byte(s);
		break;
	case 1: /* insert a byte */
		if (*len + 1 < cap) {
			pos = xs_below(s, *len + 1);
			memmove(buf + pos + 1, buf + pos, *len - pos);
			buf[pos] = (char)pick_byte(s);
			(*len)++;
		}
		break;
	case 2: /* delete a byte */
		if (*len > 0) {
			pos = xs_below(s, *len);
			memmove(buf + pos, buf + pos + 1, *len - pos - 1);
			(*len)--;
		}
		break;
	default: /* truncate */
		*len = xs_below(s, *len + 1);
		break;
	}
	buf[*len] = '\0';
}

Test(uri_fuzz, mutations, .timeout = 60)
{
	static const char *const seeds[] = {
		"redis://localhost",
		"redis://127.0.0.1:6380/2",
		"redis://alice:s3cret@host.example:6390/15",
		"redis://:p%40ss%3Aw%2Ford@h/0",
		"redis://[::1]:6379/",
		"redis://u:a@b:c@[2001:db8::1]/2147483647",
		"REDIS://H:65535",
	};
	uint64_t s = 0x9e3779b97f4a7c15u;
	char buf[256];
	int i, ok = 0, bad = 0;

	for (i = 0; i < 20000; i++) {
		const char *seed = seeds[xs_below(&s, sizeof seeds / sizeof seeds[0])];
		size_t len = strlen(seed);
		size_t n = 1 + xs_below(&s, 4);
		dlock__uri u;
		char err[256];
		int rc;

		memcpy(buf, seed, len + 1);
		while (n-- > 0)
			mutate(buf, &len, sizeof buf, &s);
		memset(&u, 0xa5, sizeof u);
		err[0] = '\0';
		rc = dlock__uri_parse(&u, buf, err, sizeof err);
		if (rc == 0) {
			ok++;
			cr_assert_not_null(u.host, "iteration %d", i);
			cr_assert(u.host[0] != '\0', "iteration %d: empty host", i);
			cr_assert(u.port >= 1 && u.port <= 65535, "iteration %d: port %d", i,
					u.port);
			cr_assert(u.db >= 0, "iteration %d: db %d", i, u.db);
			dlock__uri_clear(&u);
		} else {
			bad++;
			cr_assert_eq(rc, DLOCK_EINVAL, "iteration %d: rc %d", i, rc);
			cr_assert(is_zeroed(&u), "iteration %d: out not zeroed", i);
			cr_assert(err[0] != '\0', "iteration %d: no message", i);
			cr_assert_null(strchr(err, '\n'), "iteration %d: multi-line message", i);
		}
	}
	/* Both outcomes must be exercised, or the mutations are too weak or too strong. */
	cr_assert_gt(ok, 100, "only %d parses succeeded", ok);
	cr_assert_gt(bad, 100, "only %d parses failed", bad);
}
