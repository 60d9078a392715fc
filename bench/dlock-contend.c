/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock-contend - one process of the contended case that bench/contend.js
 * runs for every implementation alike: N such processes on one lock on one
 * server, each in a loop of
 *
 *     dlock_lock_acquire (waits on the lock's pub/sub channel)
 *     hold --hold-us (spinning)    dlock_lock_release    sleep --think-us
 *
 * for --duration seconds. It first warms up on a lock of its own, prints
 * "ready" and waits for a line on stdin, so that all N start together (the
 * line "go WARM_END END", CLOCK_MONOTONIC ns, gives all of them the same
 * deadlines; a bare "go" means now + --warm-s and + --duration); then it
 * runs the loop unrecorded until WARM_END (the contended paths warm too: it
 * matters to a JIT, and it is the same for all), then recorded until END. Then
 * it prints what contend.js merges: "window START END", "cpu US" (its own
 * getrusage user+sys over the loop), "failed N", and one line per hold,
 * "h ACQUIRED UNLOCK_CALLED UNLOCK_RETURNED", in CLOCK_MONOTONIC ns, the
 * clock the Java, Go and node workers read as well.
 *
 * Only the public API, linked as a user would (the static library).
 *
 * usage: dlock-contend --uri redis://127.0.0.1:PORT --name LOCK [--duration S]
 *                      [--hold-us N] [--think-us N] [--warmup N] [--warm-s S]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <dlock.h>

#include "clock.h"

#define LEASE_MS 10000

static struct {
	const char *uri, *name;
	double duration, warm_s;
	long hold_us, think_us, warmup;
} opt = { NULL, NULL, 10, 3, 100, 1000, 2000 };

typedef struct hold {
	uint64_t acquired, unlock_called, unlock_returned;
} hold;

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "dlock-contend: %s: %s\n", what, msg);
	exit(1);
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static void parse_args(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "uri", required_argument, NULL, 'u' },
		{ "name", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "hold-us", required_argument, NULL, 'H' },
		{ "think-us", required_argument, NULL, 'T' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "warm-s", required_argument, NULL, 'W' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (c) {
		case 'u': opt.uri = optarg; break;
		case 'n': opt.name = optarg; break;
		case 'd': opt.duration = atof(optarg); break;
		case 'H': opt.hold_us = atol(optarg); break;
		case 'T': opt.think_us = atol(optarg); break;
		case 'w': opt.warmup = atol(optarg); break;
		case 'W': opt.warm_s = atof(optarg); break;
		default: exit(2);
		}
	}
	if (opt.uri == NULL || opt.name == NULL)
		die("usage", "--uri and --name are required");
	if (strncmp(opt.uri, "redis://127.0.0.1:", 18) != 0)
		die("usage", "only redis://127.0.0.1:PORT is allowed");
}

static dlock_lock *open_lock(dlock_client *client, const char *name)
{
	dlock_lock *l = NULL;

	if (dlock_lock_new(&l, client, name, NULL) < 0)
		die("dlock_lock_new", dlock_errmsg_last());
	return l;
}

/* The process's own lock: connections, scripts and code paths warm. */
static void warm_up(dlock_client *client)
{
	char name[256];
	dlock_lock *l;
	long i;

	snprintf(name, sizeof(name), "%s:warm:%ld", opt.name, (long)getpid());
	l = open_lock(client, name);
	for (i = 0; i < opt.warmup; i++)
		if (dlock_lock_acquire(l, NULL, 0, LEASE_MS) >= 0)
			dlock_lock_release(l, NULL);
	dlock_lock_free(l);
}

/* The go line; *warm_end and *end, the deadlines. */
static void wait_for_go(uint64_t *warm_end, uint64_t *end)
{
	char line[128];
	unsigned long long a, b;

	printf("ready\n");
	fflush(stdout);
	if (fgets(line, sizeof(line), stdin) == NULL)
		die("stdin", "no go line");
	if (sscanf(line, "go %llu %llu", &a, &b) == 2) {
		*warm_end = a;
		*end = b;
	} else {
		*warm_end = now_ns() + (uint64_t)(opt.warm_s * 1e9);
		*end = *warm_end + (uint64_t)(opt.duration * 1e9);
	}
}

/* The loop until end, holds recorded from warm_end on; returns them, *n. */
static hold *contend(dlock_lock *l, uint64_t warm_end, uint64_t end, size_t *n, uint64_t *t0,
		uint64_t *t1, double *cpu)
{
	size_t cap = 1 << 16;
	hold *h = malloc(cap * sizeof(*h));
	double c0 = 0;
	int recording = 0;

	*n = 0;
	*t0 = end;
	while (h != NULL) {
		uint64_t t = now_ns();
		hold x;

		if (t >= end)
			break;
		if (!recording && t >= warm_end) {
			recording = 1;
			*t0 = t;
			c0 = cpu_us();
		}

		if (dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, LEASE_MS) < 0)
			die("dlock_lock_acquire", dlock_lock_errmsg(l));
		x.acquired = now_ns();
		while (now_ns() < x.acquired + (uint64_t)opt.hold_us * 1000)
			; /* held: spin, as a short critical section would */
		x.unlock_called = now_ns();
		if (dlock_lock_release(l, NULL) < 0)
			die("dlock_lock_release", dlock_lock_errmsg(l));
		x.unlock_returned = now_ns();
		if (!recording) {
			if (opt.think_us > 0)
				sleep_us(opt.think_us);
			continue;
		}
		if (*n == cap)
			h = realloc(h, (cap *= 2) * sizeof(*h));
		if (h != NULL)
			h[(*n)++] = x;
		if (opt.think_us > 0)
			sleep_us(opt.think_us);
	}
	if (h == NULL)
		die("malloc", "out of memory");
	*t1 = now_ns();
	*cpu = recording ? cpu_us() - c0 : 0;
	return h;
}

int main(int argc, char **argv)
{
	dlock_client *client = NULL;
	dlock_lock *l;
	uint64_t t0, t1, warm_end, end;
	double cpu;
	size_t n, i;
	hold *h;

	parse_args(argc, argv);
	if (dlock_client_new(&client, opt.uri, NULL) < 0)
		die("dlock_client_new", dlock_errmsg_last());
	warm_up(client);
	l = open_lock(client, opt.name);
	wait_for_go(&warm_end, &end);
	h = contend(l, warm_end, end, &n, &t0, &t1, &cpu);
	printf("window %" PRIu64 " %" PRIu64 "\ncpu %.0f\nfailed 0\n", t0, t1, cpu);
	for (i = 0; i < n; i++)
		printf("h %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", h[i].acquired, h[i].unlock_called,
				h[i].unlock_returned);
	printf("end\n");
	free(h);
	dlock_lock_free(l);
	dlock_client_free(client);
	return 0;
}
