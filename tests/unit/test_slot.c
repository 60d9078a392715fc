/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hash slots: CRC16-XMODEM and the hash-tag rule of the cluster
 * specification. The expected slots were computed once by a real
 * redis-server 7.0.15 (CLUSTER KEYSLOT on a cluster-enabled node) and are
 * hard-coded here, so the test needs no server.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/topology/slot.h"

typedef struct slot_case {
	const char *key;
	size_t len;
	uint16_t slot; /* CLUSTER KEYSLOT on redis-server 7.0.15 */
} slot_case;

#define K(s) s, sizeof s - 1

static const slot_case cases[] = {
	{ K(""), 0 },
	{ K("foo"), 12182 },
	{ K("bar"), 5061 },
	{ K("123456789"), 12739 }, /* 0x31C3 */
	{ K("somekey"), 11058 },   /* the CLUSTER KEYSLOT page's examples */
	{ K("foo{hash_tag}"), 2515 },
	{ K("{user1000}.following"), 3443 },
	{ K("{user1000}.followers"), 3443 },
	{ K("foo{}{bar}"), 8363 },    /* empty first tag: the whole key */
	{ K("foo{{bar}}zap"), 4015 }, /* the tag is "{bar" */
	{ K("foo{bar}{zap}"), 5061 }, /* the first tag only: "bar" */
	{ K("{}"), 15257 },
	{ K("{"), 4092 },
	{ K("}"), 12090 },
	{ K("a{b"), 13340 },
	{ K("a}b{c}"), 7365 },
	{ K("}{"), 12793 },
	{ K("{}}"), 14790 },
	{ K("{a}"), 15495 },
	{ K("a{}"), 6082 },
	{ K("\x00"), 0 },
	{ K("\xff\x00\x01"), 8002 },
	{ K("{\x00}"), 0 },
	{ K("\x80\xfe{\xff\x00}z"), 1023 },
	{ K("mylock"), 1711 },
	{ K("redisson_lock__channel:{mylock}"), 1711 },
};

/* The specification's definition, bit by bit, to check the table against. */
static uint16_t crc16_bitwise(const unsigned char *p, size_t len)
{
	uint16_t crc = 0;
	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)(p[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
	}
	return crc;
}

Test(slot, crc16_check_value, .timeout = 10)
{
	cr_assert_eq(dlock__crc16("123456789", 9), 0x31C3);
	cr_assert_eq(dlock__crc16(NULL, 0), 0);
	cr_assert_eq(dlock__crc16("", 0), 0);
}

Test(slot, crc16_table_matches_the_definition, .timeout = 10)
{
	unsigned char buf[512];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)(i * 131u + 7u);
	for (int b = 0; b < 256; b++) {
		unsigned char one = (unsigned char)b;
		cr_assert_eq(dlock__crc16((const char *)&one, 1), crc16_bitwise(&one, 1),
				"byte 0x%02x", b);
	}
	for (size_t len = 0; len <= sizeof buf; len += 37)
		cr_assert_eq(dlock__crc16((const char *)buf, len), crc16_bitwise(buf, len),
				"length %zu", len);
}

Test(slot, keys_hash_as_redis_server_says, .timeout = 10)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const slot_case *c = &cases[i];
		cr_expect_eq(dlock__key_slot(c->key, c->len), c->slot, "case %zu: slot %u, want %u",
				i, dlock__key_slot(c->key, c->len), c->slot);
	}
	cr_assert_eq(dlock__key_slot(NULL, 0), 0);
}

typedef struct tag_case {
	const char *key;
	size_t len;
	int found;
	const char *tag; /* when found */
	size_t tag_len;
} tag_case;

static const tag_case tags[] = {
	{ K("{user1000}.following"), 1, K("user1000") },
	{ K("foo{bar}{zap}"), 1, K("bar") },
	{ K("foo{{bar}}zap"), 1, K("{bar") },
	{ K("a}b{c}"), 1, K("c") },
	{ K("{\x00}"), 1, K("\x00") },
	{ K("x{a}"), 1, K("a") },
	{ K("foo{}{bar}"), 0, NULL, 0 },
	{ K("{}"), 0, NULL, 0 },
	{ K("{"), 0, NULL, 0 },
	{ K("}"), 0, NULL, 0 },
	{ K("a{b"), 0, NULL, 0 },
	{ K("}{"), 0, NULL, 0 },
	{ K("plain"), 0, NULL, 0 },
	{ K(""), 0, NULL, 0 },
};

Test(slot, hash_tags, .timeout = 10)
{
	for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
		const tag_case *c = &tags[i];
		const char *tag = NULL;
		size_t tag_len = 99;
		int found = dlock__key_tag(c->key, c->len, &tag, &tag_len);
		cr_assert_eq(found, c->found, "case %zu: found %d", i, found);
		if (found) {
			cr_assert_eq(tag_len, c->tag_len, "case %zu: tag length %zu", i, tag_len);
			cr_assert(memcmp(tag, c->tag, tag_len) == 0, "case %zu: tag", i);
			cr_assert(tag > c->key && tag + tag_len < c->key + c->len,
					"case %zu: the tag points into the key", i);
		} else {
			cr_assert_eq(tag, c->key, "case %zu: no tag means the whole key", i);
			cr_assert_eq(tag_len, c->len, "case %zu", i);
		}
		cr_assert_eq(dlock__key_tag(c->key, c->len, NULL, NULL), c->found, "case %zu", i);
	}
}

Test(slot, a_tag_ends_at_the_length_not_at_a_nul, .timeout = 10)
{
	/* "{ab}" cut before its '}' has no tag, even with a '}' past the end. */
	const char key[] = "{ab}";
	cr_assert_eq(dlock__key_tag(key, 3, NULL, NULL), 0);
	cr_assert_eq(dlock__key_slot(key, 3), dlock__crc16(key, 3) & 16383);
	cr_assert_eq(dlock__key_slot(key, 4), dlock__crc16("ab", 2) & 16383);
}

Test(slot, keys_with_one_tag_share_a_slot, .timeout = 10)
{
	/* Redisson's key family for a lock named "{order:42}" and one named "order:42". */
	static const char *const family[] = { "order:42", "redisson_lock__channel:{order:42}",
		"redisson_unlock_latch:{order:42}:0123", "redisson_lock_queue:{order:42}",
		"redisson_lock_timeout:{order:42}", "redisson_lock_token:{order:42}" };
	uint16_t slot = dlock__key_slot(family[0], strlen(family[0]));
	for (size_t i = 1; i < sizeof family / sizeof family[0]; i++)
		cr_assert_eq(dlock__key_slot(family[i], strlen(family[i])), slot, "%s", family[i]);
	for (uint32_t i = 0; i < 2000; i++) {
		char key[32];
		int n = snprintf(key, sizeof key, "k%u", (unsigned)i);
		cr_assert_lt(dlock__key_slot(key, (size_t)n), 16384);
	}
}
