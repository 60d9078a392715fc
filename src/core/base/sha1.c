/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SHA-1 (FIPS 180-1), one-shot. dlock needs it only to know a script's
 * EVALSHA digest without asking the server, so it is written for clarity
 * and portability (no endianness or alignment assumptions), not speed.
 */
#include <stdint.h>
#include <string.h>

#include "core/base/sha1.h"

static uint32_t rol(uint32_t x, unsigned n)
{
	return (x << n) | (x >> (32 - n));
}

/* One 512-bit block: the 80-round compression function of FIPS 180-1 section 7. */
static void sha1_block(uint32_t h[5], const unsigned char *b)
{
	uint32_t w[80];
	uint32_t a, bb, c, d, e, f, k, t;
	int i;

	/* Big-endian words, built byte by byte so any alignment and byte order works. */
	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
				(uint32_t)b[4 * i + 2] << 8 | (uint32_t)b[4 * i + 3];
	for (i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);

	a = h[0];
	bb = h[1];
	c = h[2];
	d = h[3];
	e = h[4];
	for (i = 0; i < 80; i++) {
		if (i < 20) {
			f = (bb & c) | (~bb & d);
			k = 0x5a827999u;
		} else if (i < 40) {
			f = bb ^ c ^ d;
			k = 0x6ed9eba1u;
		} else if (i < 60) {
			f = (bb & c) | (bb & d) | (c & d);
			k = 0x8f1bbcdcu;
		} else {
			f = bb ^ c ^ d;
			k = 0xca62c1d6u;
		}
		t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(bb, 30);
		bb = a;
		a = t;
	}
	h[0] += a;
	h[1] += bb;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void dlock__sha1_hex(const void *data, size_t len, char out[41])
{
	static const char hex[] = "0123456789abcdef";
	uint32_t h[5] = { 0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u };
	const unsigned char *p = data;
	unsigned char tail[128];
	size_t full = len - len % 64, rest = len % 64, tlen, i;
	uint64_t bits = (uint64_t)len * 8;

	for (i = 0; i < full; i += 64)
		sha1_block(h, p + i);

	/*
	 * Padding: a 1 bit, zeros, then the 64-bit big-endian message length.
	 * When fewer than 9 bytes remain in the block it spills into a second one.
	 */
	if (rest > 0)
		memcpy(tail, p + full, rest);
	tail[rest] = 0x80;
	tlen = rest + 1 + 8 <= 64 ? 64 : 128;
	memset(tail + rest + 1, 0, tlen - rest - 1 - 8);
	for (i = 0; i < 8; i++)
		tail[tlen - 1 - i] = (unsigned char)(bits >> (8 * i));
	sha1_block(h, tail);
	if (tlen == 128)
		sha1_block(h, tail + 64);

	for (i = 0; i < 20; i++) {
		unsigned char byte = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));

		out[2 * i] = hex[byte >> 4];
		out[2 * i + 1] = hex[byte & 0xf];
	}
	out[40] = '\0';
}
