/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * book_rental - two customers, one copy left: renting the last book under a lock.
 *
 * A book shop's rental system keeps each title's stock in Redis
 * ("book:<id>:stock"). Customers A and B both open "The Grand Design", see
 * one copy left and press "rent" at the same moment. Reading the stock and
 * writing it back are two steps, so without a lock both could read 1 and
 * both leave with the book. Here each buyer (a thread; the lock owner is
 * per thread, as in Redisson) takes the RLock "lock:book:<id>" before it
 * reads, waits up to 5 s for it, holds it with a 10 s lease (never
 * renewed: renting takes milliseconds, and a crashed buyer frees the book
 * after 10 s), and releases it after writing. Exactly one buyer rents the
 * copy; the other is told it is sold out.
 *
 *   book_rental [redis://[[user]:password@]host[:port][/db]] [BOOK_ID]
 *
 * The server comes from the argument, else the first URI of $DLOCK_NODES
 * (a comma-separated list), else redis://127.0.0.1:6379. BOOK_ID defaults to
 * "grand-design". The program sets the stock to 1 first, so it can be run
 * again and again. Exit status: 0 when exactly one buyer rented the copy,
 * 1 on any error.
 *
 * The stock is read and written with hiredis (plain GET/SET on purpose: the
 * lock is what makes the read-modify-write safe). Build against an installed
 * dlock:
 *   cc book_rental.c $(pkg-config --cflags --libs dlock hiredis) -lpthread -o book_rental
 */
#define _POSIX_C_SOURCE 200809L

#include <dlock.h>
#include <hiredis/hiredis.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUYERS 2
#define LOCK_WAIT_MS 5000
#define LOCK_LEASE_MS 10000

/* Where the stock lives: the same server the lock is on, for simplicity. */
typedef struct server {
	char host[256];
	int port;
	char user[128];
	char password[256];
	int db;
} server;

typedef struct shop {
	server srv;
	dlock_lock *lock;  /* one handle, shared by the buyers' threads */
	char stock_key[256];
	pthread_barrier_t start; /* both buyers press "rent" at the same moment */
} shop;

typedef struct buyer {
	shop *shop;
	int id;
	int rented;   /* 1 rented the copy, 0 sold out, -1 error */
} buyer;

/*
 * Split redis://[[user]:password@]host[:port][/db] for hiredis. dlock has
 * already accepted the URI (dlock_client_new), so this can stay simple.
 */
static int parse_uri(const char *uri, server *s)
{
	const char *p = uri, *at, *end, *colon;
	size_t n;

	memset(s, 0, sizeof(*s));
	s->port = 6379;
	if (strncmp(p, "redis://", 8) == 0)
		p += 8;
	end = p + strcspn(p, "/");
	at = NULL;
	for (const char *q = p; q < end; q++)
		if (*q == '@')
			at = q;
	if (at != NULL) {
		colon = memchr(p, ':', (size_t)(at - p));
		if (colon != NULL) {
			snprintf(s->user, sizeof(s->user), "%.*s", (int)(colon - p), p);
			snprintf(s->password, sizeof(s->password), "%.*s", (int)(at - colon - 1),
				 colon + 1);
		} else {
			snprintf(s->password, sizeof(s->password), "%.*s", (int)(at - p), p);
		}
		p = at + 1;
	}
	if (*p == '[') { /* [IPv6]:port */
		const char *close = memchr(p, ']', (size_t)(end - p));

		if (close == NULL)
			return -1;
		snprintf(s->host, sizeof(s->host), "%.*s", (int)(close - p - 1), p + 1);
		p = close + 1;
		colon = *p == ':' ? p : NULL;
	} else {
		colon = memchr(p, ':', (size_t)(end - p));
		n = (size_t)((colon != NULL ? colon : end) - p);
		snprintf(s->host, sizeof(s->host), "%.*s", (int)n, p);
	}
	if (colon != NULL)
		s->port = atoi(colon + 1);
	if (*end == '/' && end[1] != '\0')
		s->db = atoi(end + 1);
	return s->host[0] != '\0' && s->port > 0 ? 0 : -1;
}

/* A hiredis connection to the shop's server, authenticated, on the right db. */
static redisContext *connect_stock(const server *s)
{
	struct timeval tv = { 2, 0 };
	redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
	redisReply *r = NULL;

	if (c == NULL || c->err) {
		fprintf(stderr, "book_rental: %s:%d: %s\n", s->host, s->port,
			c != NULL ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	if (s->password[0] != '\0') {
		if (s->user[0] != '\0')
			r = redisCommand(c, "AUTH %s %s", s->user, s->password);
		else
			r = redisCommand(c, "AUTH %s", s->password);
		if (r == NULL || r->type == REDIS_REPLY_ERROR)
			goto fail;
		freeReplyObject(r);
	}
	if (s->db != 0) {
		r = redisCommand(c, "SELECT %d", s->db);
		if (r == NULL || r->type == REDIS_REPLY_ERROR)
			goto fail;
		freeReplyObject(r);
	}
	return c;
fail:
	fprintf(stderr, "book_rental: %s:%d: %s\n", s->host, s->port,
		r != NULL ? r->str : c->errstr);
	freeReplyObject(r);
	redisFree(c);
	return NULL;
}

/* GET the stock: 0 and *stock, or -1. */
static int read_stock(redisContext *c, const char *key, long *stock)
{
	redisReply *r = redisCommand(c, "GET %s", key);
	int rc = -1;

	if (r != NULL && r->type == REDIS_REPLY_STRING) {
		*stock = strtol(r->str, NULL, 10);
		rc = 0;
	} else if (r != NULL && r->type == REDIS_REPLY_NIL) {
		*stock = 0;
		rc = 0;
	}
	if (rc != 0)
		fprintf(stderr, "book_rental: GET %s: %s\n", key,
			r != NULL ? (r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply")
				  : c->errstr);
	freeReplyObject(r);
	return rc;
}

static int write_stock(redisContext *c, const char *key, long stock)
{
	redisReply *r = redisCommand(c, "SET %s %ld", key, stock);
	int rc = r != NULL && r->type == REDIS_REPLY_STATUS ? 0 : -1;

	if (rc != 0)
		fprintf(stderr, "book_rental: SET %s: %s\n", key,
			r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
	freeReplyObject(r);
	return rc;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0) {
	}
}

static void *buyer_main(void *arg)
{
	buyer *b = arg;
	shop *s = b->shop;
	redisContext *redis = connect_stock(&s->srv); /* hiredis contexts are per thread */
	long stock = 0;
	int rc;

	b->rented = -1;
	pthread_barrier_wait(&s->start);
	if (redis == NULL)
		return NULL;

	/* The lock guards the read-modify-write of the stock. */
	rc = dlock_lock_acquire(s->lock, NULL, LOCK_WAIT_MS, LOCK_LEASE_MS);
	if (rc != 0) {
		fprintf(stderr, "buyer %d: could not lock %s: %s: %s\n", b->id,
			dlock_lock_name(s->lock), dlock_strerror(rc), dlock_lock_errmsg(s->lock));
		redisFree(redis);
		return NULL;
	}
	if (read_stock(redis, s->stock_key, &stock) == 0) {
		printf("buyer %d: holds %s, sees %ld copy(ies) left\n", b->id,
		       dlock_lock_name(s->lock), stock);
		if (stock > 0) {
			/* Creating the order takes a moment: the other buyer waits meanwhile. */
			sleep_ms(200);
			if (write_stock(redis, s->stock_key, stock - 1) == 0) {
				printf("buyer %d rented the last copy (stock %ld -> %ld)\n", b->id,
				       stock, stock - 1);
				b->rented = 1;
			}
		} else {
			printf("buyer %d: sold out\n", b->id);
			b->rented = 0;
		}
	}
	fflush(stdout);

	rc = dlock_lock_release(s->lock, NULL);
	if (rc != 0) {
		/* The lease ran out before we released: someone else may have rented
		 * meanwhile, so the result can no longer be trusted. */
		fprintf(stderr, "buyer %d: unlock %s: %s: %s\n", b->id, dlock_lock_name(s->lock),
			dlock_strerror(rc), dlock_lock_errmsg(s->lock));
		b->rented = -1;
	}
	redisFree(redis);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *uri = argc > 1 ? argv[1] : getenv("DLOCK_NODES");
	const char *book = argc > 2 ? argv[2] : "grand-design";
	char first[1024], lock_name[256];
	dlock_client *client = NULL;
	redisContext *redis = NULL;
	pthread_t threads[BUYERS];
	buyer buyers[BUYERS];
	shop s;
	long stock = -1;
	int rc, i, started = 0, rented = 0, sold_out = 0, status = 1;

	if (uri == NULL || *uri == '\0') {
		uri = "redis://127.0.0.1:6379";
	} else if (strchr(uri, ',') != NULL) {
		/* One RLock lives on one server: take the first of the list. */
		snprintf(first, sizeof first, "%.*s", (int)strcspn(uri, ","), uri);
		uri = first;
	}

	memset(&s, 0, sizeof(s));
	rc = dlock_client_new(&client, uri, NULL);
	if (rc != 0) {
		fprintf(stderr, "book_rental: %s: %s\n", dlock_strerror(rc), dlock_errmsg_last());
		return 1;
	}
	if (parse_uri(uri, &s.srv) != 0) {
		fprintf(stderr, "book_rental: cannot read host and port from %s\n", uri);
		goto out;
	}
	snprintf(s.stock_key, sizeof(s.stock_key), "book:%s:stock", book);
	/* One lock per title: buyers of other books do not wait for each other. */
	snprintf(lock_name, sizeof(lock_name), "lock:book:%s", book);
	rc = dlock_lock_new(&s.lock, client, lock_name, NULL);
	if (rc != 0) {
		fprintf(stderr, "book_rental: %s: %s\n", dlock_strerror(rc),
			dlock_client_errmsg(client));
		goto out;
	}

	/* Restock: one copy left. */
	redis = connect_stock(&s.srv);
	if (redis == NULL || write_stock(redis, s.stock_key, 1) != 0)
		goto out;
	printf("%s on %s: 1 copy left; 2 buyers want it\n", s.stock_key, dlock_client_node(client));

	if (pthread_barrier_init(&s.start, NULL, BUYERS) != 0) {
		fprintf(stderr, "book_rental: pthread_barrier_init failed\n");
		goto out;
	}
	for (i = 0; i < BUYERS; i++) {
		buyers[i].shop = &s;
		buyers[i].id = i + 1;
		buyers[i].rented = -1;
		if (pthread_create(&threads[i], NULL, buyer_main, &buyers[i]) != 0) {
			fprintf(stderr, "book_rental: pthread_create failed\n");
			/* A thread stuck at the barrier would never return: stop here. */
			exit(1);
		}
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	pthread_barrier_destroy(&s.start);

	for (i = 0; i < BUYERS; i++) {
		rented += buyers[i].rented == 1;
		sold_out += buyers[i].rented == 0;
	}
	if (read_stock(redis, s.stock_key, &stock) != 0)
		goto out;
	if (rented == 1 && sold_out == BUYERS - 1 && stock == 0) {
		printf("ok: exactly one buyer rented the book; stock is now %ld\n", stock);
		status = 0;
	} else {
		fprintf(stderr, "book_rental: FAILED: %d rented, %d sold out, stock %ld\n", rented,
			sold_out, stock);
	}
out:
	redisFree(redis);
	dlock_lock_free(s.lock);
	dlock_client_free(client);
	return status;
}
