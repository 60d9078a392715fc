/* SPDX-License-Identifier: BSD-3-Clause */
/* Who holds it: the client's registration (core/drive/holder.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fmt.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/drive/ask.h"
#include "core/drive/holder.h"
#include "core/mux/mux_loop.h"
#include "core/drive/reactor.h"

/* A refresh that failed to reach the server is tried again this much sooner. */
#define RETRY_DIVISOR 4

struct dlock__holder {
	dlock_client *client; /* whose it is: a plain client, or a cluster's root */
	char key[sizeof(DLOCK__HOLDER_PREFIX) + 36];
	size_t key_len;
	char *label, *command; /* the copies c->opts points at */
	char *prefix;          /* host, pid, label and cmd lines: fixed for the client's life */
	size_t prefix_len;
	_Atomic int64_t written_at; /* monotonic ms of the latest write sent (0: none) */
	_Atomic int64_t since_ms;   /* Unix ms of the registration the key has now */
	_Atomic int held;           /* holds the layer above has recorded */
	_Atomic int pending;        /* a cluster's: the background thread writes it */
	_Atomic int ever;           /* a write went out once: delete it at the end */
	/* The background thread's refresh (its thread only). */
	int running, closing;
	dlock__mux_loop ml;
	dlock__mux_op op;
	const char *argv[5];
	size_t lens[5];
	char value[1024], ttl[24];
};

static int64_t period(const dlock__holder *h)
{
	return h->client->opts.watchdog_timeout_ms / 3;
}

/* At most DLOCK__HOLDER_TEXT_MAX bytes of s (not cutting a UTF-8
 * character), control characters (a line break would forge a field) as spaces. */
static char *clean_copy(const char *s)
{
	size_t n = strlen(s), i;
	char *out;

	if (n > DLOCK__HOLDER_TEXT_MAX) {
		n = DLOCK__HOLDER_TEXT_MAX;
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	}
	if ((out = dlock__strndup(s, n)) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			out[i] = ' ';
	return out;
}

static void holder_release(dlock__holder *h)
{
	if (h == NULL)
		return;
	dlock__free(h->label);
	dlock__free(h->command);
	dlock__free(h->prefix);
	dlock__free(h);
}

int dlock__holder_new(dlock_client *c)
{
	dlock__holder *h;
	char host[256] = "";
	int n;
	size_t i;

	if (c->opts.label == NULL)
		return 0;
	if ((h = dlock__calloc(1, sizeof(*h))) == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "client: out of memory");
	h->client = c;
	h->key_len = (size_t)snprintf(h->key, sizeof(h->key), DLOCK__HOLDER_PREFIX "%s", c->id);
	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	for (i = 0; host[i] != '\0'; i++)
		if ((unsigned char)host[i] < 0x20 || host[i] == 0x7f)
			host[i] = ' ';
	h->label = clean_copy(c->opts.label);
	h->command = clean_copy(c->opts.command != NULL ? c->opts.command : "");
	n = snprintf(NULL, 0, "host=%s\npid=%lld\nlabel=%s\ncmd=%s\n", host, (long long)getpid(),
			h->label ? h->label : "", h->command ? h->command : "");
	h->prefix = dlock__malloc((size_t)n + 1);
	if (h->label == NULL || h->command == NULL || h->prefix == NULL) {
		holder_release(h);
		return dlock__seterr(DLOCK_ENOMEM, "client: out of memory");
	}
	snprintf(h->prefix, (size_t)n + 1, "host=%s\npid=%lld\nlabel=%s\ncmd=%s\n", host,
			(long long)getpid(), h->label, h->command);
	h->prefix_len = (size_t)n;
	c->opts.label = h->label;
	c->opts.command = h->command;
	c->holder = h;
	return 0;
}

void dlock__holder_share(dlock_client *member, const dlock_client *root)
{
	member->holder_root = root;
}

static int fresh(dlock__holder *h, int64_t now)
{
	int64_t w = atomic_load(&h->written_at);

	return w != 0 && now - w < period(h);
}

/* Take the turn to write (one writer per period); 1 when taken. */
static int claim(dlock__holder *h, int64_t now)
{
	int64_t w = atomic_load(&h->written_at);

	do {
		if (w != 0 && now - w < period(h))
			return 0;
	} while (!atomic_compare_exchange_weak(&h->written_at, &w, now));
	/* The key may have expired since: a registration anew. */
	if (w == 0 || now - w >= h->client->opts.watchdog_timeout_ms)
		atomic_store(&h->since_ms, dlock__wall_ms());
	return 1;
}

/* SET key value PX ttl into argv/lens (value and ttl: the buffers). */
static void build(dlock__holder *h, const char **argv, size_t *lens, char *value, size_t size,
		char ttl[24])
{
	int n = snprintf(value, size, "%.*ssince=%lld\n", (int)h->prefix_len, h->prefix,
			(long long)atomic_load(&h->since_ms));

	argv[0] = "SET";
	argv[1] = h->key;
	argv[2] = value;
	argv[3] = "PX";
	argv[4] = ttl;
	lens[0] = 3;
	lens[1] = h->key_len;
	lens[2] = n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
	lens[3] = 2;
	lens[4] = dlock__fmt_i64(ttl, h->client->opts.watchdog_timeout_ms);
}

void dlock__holder_ride(dlock_client *c, dlock__conn *conn)
{
	dlock__holder *h = c->holder_root != NULL ? c->holder_root->holder : c->holder;
	const char *argv[5];
	size_t lens[5];
	char value[1024], ttl[24];
	int64_t now;

	if (h == NULL)
		return;
	now = dlock__now_ms();
	if (fresh(h, now))
		return;
	/* A cluster's key lives where its slot is: not always this node. */
	if (h->client->node.cluster != NULL &&
			dlock__client_for_key(h->client, h->key, h->key_len) != c) {
		atomic_store(&h->pending, 1);
		dlock__reactor_flush_at(h->client->reactor, now);
		return;
	}
	if (!claim(h, now))
		return;
	build(h, argv, lens, value, sizeof(value), ttl);
	if (dlock__conn_defer(conn, 5, argv, lens) < 0) {
		atomic_store(&h->written_at, 0); /* out of memory: the next one tries */
		return;
	}
	atomic_store(&h->ever, 1);
}

void dlock__holder_held(dlock_client *c, int delta)
{
	dlock__holder *h = c->holder;

	if (h == NULL)
		return;
	/* The first hold: the background thread keeps it fresh from now on. */
	if (atomic_fetch_add(&h->held, delta) == 0 && delta > 0) {
		int64_t w = atomic_load(&h->written_at);

		dlock__reactor_flush_at(h->client->reactor, w != 0 ? w + period(h) : dlock__now_ms());
	}
}

static void schedule(dlock__holder *h, int64_t at)
{
	if (atomic_load(&h->held) > 0 || atomic_load(&h->pending))
		dlock__reactor_flush_at(h->client->reactor, at);
}

static void written(dlock__mux_loop *ml)
{
	dlock__holder *h = (dlock__holder *)((char *)ml - offsetof(dlock__holder, ml));
	int64_t next = atomic_load(&h->written_at) + period(h);

	dlock__mux_loop_end(ml);
	h->running = 0;
	/* Read and dropped: a refusal (an ACL, OOM) is the server's to keep.
	 * Not answered: try again sooner. */
	if (h->op.rc < 0)
		next = dlock__now_ms() + period(h) / RETRY_DIVISOR + 1;
	dlock__mux_clear(&h->op, 1);
	schedule(h, next);
}

void dlock__holder_tick(dlock_client *c)
{
	dlock__holder *h = c->holder;
	int64_t now;

	if (h == NULL || h->client != c || h->running || h->closing)
		return;
	now = dlock__now_ms();
	if (!atomic_load(&h->pending) &&
			(atomic_load(&h->held) == 0 || now < atomic_load(&h->written_at) + period(h))) {
		schedule(h, atomic_load(&h->written_at) + period(h));
		return;
	}
	atomic_store(&h->pending, 0);
	if (!claim(h, now)) {
		schedule(h, atomic_load(&h->written_at) + period(h));
		return;
	}
	build(h, h->argv, h->lens, h->value, sizeof(h->value), h->ttl);
	memset(&h->op, 0, sizeof(h->op));
	h->op.client = c; /* a cluster's run sends it where the key's slot is */
	h->op.argv = h->argv;
	h->op.lens = h->lens;
	h->op.argc = 5;
	if (dlock__mux_loop_begin(&h->ml, dlock__reactor_loop(c->reactor), &h->op, 1, NULL, NULL,
			    written) < 0) {
		atomic_store(&h->written_at, 0);
		atomic_store(&h->pending, 1);
		dlock__reactor_flush_at(c->reactor, now + period(h) / RETRY_DIVISOR + 1);
		return;
	}
	atomic_store(&h->ever, 1);
	h->running = 1;
}

void dlock__holder_stop(void *arg, int forked)
{
	dlock_client *c = arg;
	dlock__holder *h = c->holder;

	if (h == NULL || h->client != c)
		return;
	h->closing = 1;
	if (h->running && !forked) {
		dlock__mux_loop_end(&h->ml);
		dlock__mux_clear(&h->op, 1);
	}
	h->running = 0;
}

void dlock__holder_free(dlock_client *c)
{
	dlock__holder *h = c->holder;
	const char *argv[2];
	size_t lens[2] = { 3, 0 };
	redisReply *r = NULL;

	c->holder = NULL;
	if (h == NULL || h->client != c)
		return;
	if (atomic_load(&h->ever) && c->pid == dlock__pid()) {
		argv[0] = "DEL";
		argv[1] = h->key;
		lens[1] = h->key_len;
		if (dlock__client_ask(c, 2, argv, lens, &r) == 0)
			freeReplyObject(r); /* an error reply (an ACL): it expires by its TTL */
	}
	holder_release(h);
}
