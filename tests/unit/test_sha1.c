/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SHA-1 known answers. The expected digests come from coreutils' sha1sum
 * (and match FIPS 180-1's published examples); the 55..65-byte strings
 * straddle the point where padding spills into a second block.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/base/sha1.h"

static void check(const void *data, size_t len, const char *expected)
{
	char out[41];

	memset(out, 'Z', sizeof out);
	dlock__sha1_hex(data, len, out);
	cr_assert_eq(out[40], '\0');
	cr_assert_str_eq(out, expected, "length %zu", len);
}

/* A string of n 'x' bytes, for the block-boundary lengths. */
static void check_xs(size_t n, const char *expected)
{
	char *s = malloc(n);

	cr_assert_not_null(s);
	memset(s, 'x', n);
	check(s, n, expected);
	free(s);
}

Test(sha1, empty, .timeout = 10)
{
	check("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	/* No bytes are read when the length is 0, so NULL is acceptable. */
	check(NULL, 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

Test(sha1, abc, .timeout = 10)
{
	check("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
}

Test(sha1, fips_448_bits, .timeout = 10)
{
	const char *s = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

	cr_assert_eq(strlen(s), 56);
	check(s, strlen(s), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

Test(sha1, million_a, .timeout = 30)
{
	size_t n = 1000000;
	char *s = malloc(n);

	cr_assert_not_null(s);
	memset(s, 'a', n);
	check(s, n, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
	free(s);
}

Test(sha1, block_boundaries, .timeout = 10)
{
	check_xs(55, "cef734ba81a024479e09eb5a75b6ddae62e6abf1");
	check_xs(56, "901305367c259952f4e7af8323f480d59f81335b");
	check_xs(63, "0ddc4e0cccd9a12850deb5abb0853a4425559fec");
	check_xs(64, "bb2fa3ee7afb9f54c6dfb5d021f14b1ffe40c163");
	check_xs(65, "78c741ddc482e4cdf8c474a0876347a0905b6233");
}

/* The input is read byte by byte, so an odd address must give the same digest. */
Test(sha1, unaligned_input, .timeout = 10)
{
	char buf[4 + 3];

	memcpy(buf + 1, "abc", 3);
	check(buf + 1, 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
}
