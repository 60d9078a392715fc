/* SPDX-License-Identifier: BSD-3-Clause */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dlock/client.h"
#include "core/base/ids.h"
#include "core/base/sys.h"

static atomic_int cached_pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

static void pid_after_fork(void)
{
	atomic_store(&cached_pid, (int)getpid());
}

static void pid_init(void)
{
	atomic_store(&cached_pid, (int)getpid());
	(void)pthread_atfork(NULL, NULL, pid_after_fork);
}

pid_t dlock__pid(void)
{
	pthread_once(&pid_once, pid_init);
	return (pid_t)atomic_load_explicit(&cached_pid, memory_order_relaxed);
}

/* Per-thread xoshiro256** state: request ids need uniqueness, not secrecy,
 * and one seeding per thread keeps unlock free of system calls. */
static _Thread_local uint64_t rng[4];
static _Thread_local pid_t rng_pid; /* reseed in a forked child */
static _Thread_local const dlock__sys *rng_sys; /* and under another seam (a simulator's seed) */

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(void)
{
	uint64_t result, t;

	if (rng_pid != dlock__pid() || rng_sys != dlock__sys_get()) {
		rng_sys = dlock__sys_get();
		if (rng_sys->random(rng, sizeof(rng)) < 0) {
			/* No entropy source: the thread id and clock still make ids distinct. */
			rng[0] = (uint64_t)rng_sys->now_us() ^ ((uint64_t)rng_sys->wall_ms() << 20);
			rng[1] = dlock_thread_id() * 0x9E3779B97F4A7C15ULL;
			rng[2] = (uint64_t)getpid() | 1;
			rng[3] = (uint64_t)(uintptr_t)&rng_pid;
		}
		rng_pid = dlock__pid();
	}
	result = rotl(rng[1] * 5, 7) * 9;
	t = rng[1] << 17;
	rng[2] ^= rng[0];
	rng[3] ^= rng[1];
	rng[1] ^= rng[2];
	rng[0] ^= rng[3];
	rng[2] ^= t;
	rng[3] = rotl(rng[3], 45);
	return result;
}

uint64_t dlock__random(void)
{
	return rng_next();
}

void dlock__uuid(char out[37])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char u[16];
	int i, o = 0;

	/* A version 4 (random) UUID, as libuuid's uuid_generate_random. */
	if (dlock__sys_get()->random(u, sizeof(u)) < 0) {
		uint64_t a = rng_next(), b = rng_next();

		memcpy(u, &a, 8);
		memcpy(u + 8, &b, 8);
	}
	u[6] = (unsigned char)((u[6] & 0x0f) | 0x40);
	u[8] = (unsigned char)((u[8] & 0x3f) | 0x80);
	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[u[i] >> 4];
		out[o++] = hex[u[i] & 15];
	}
	out[o] = '\0';
}

void dlock__request_id(char out[33])
{
	static const char hex[] = "0123456789abcdef";
	uint64_t a = rng_next(), b = rng_next();
	int i;

	for (i = 0; i < 16; i++) {
		out[i] = hex[(a >> (60 - 4 * i)) & 15];
		out[16 + i] = hex[(b >> (60 - 4 * i)) & 15];
	}
	out[32] = '\0';
}

/*
 * Cached per thread: an owner name is built on every call. A forked child's
 * thread inherits the parent thread's cached value, which is harmless: a
 * child cannot use its parent's clients (their threads do not exist in it),
 * and the owner names of its own clients carry their own uuids.
 */
static _Thread_local uint64_t cached_tid;

uint64_t dlock_thread_id(void)
{
	if (cached_tid == 0)
		cached_tid = (uint64_t)syscall(SYS_gettid);
	return cached_tid;
}
