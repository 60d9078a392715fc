/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fmt.h"
#include "core/base/error.h"
#include "core/net/script.h"
#include "core/base/sha1.h"

/* pthread_once passes no argument, so the script being digested is handed
 * over in a thread-local: only the thread running the once routine reads it. */
static _Thread_local dlock__script *digesting;

static void digest(void)
{
	dlock__sha1_hex(digesting->body, strlen(digesting->body), digesting->sha);
}

static const char *script_sha(dlock__script *s)
{
	digesting = s;
	pthread_once(&s->once, digest);
	return s->sha;
}

static _Thread_local dlock__script *twinning; /* as `digesting`, for make_sharded */

/* The twin: every "redis.call('publish'" becomes "redis.call('spublish'". */
static void make_sharded(void)
{
	static const char from[] = "redis.call('publish'", to[] = "redis.call('spublish'";
	dlock__script *s = twinning, *t = dlock__calloc(1, sizeof(*t));
	size_t n = 0, len = strlen(s->body);
	const char *p;
	char *body, *w;

	for (p = strstr(s->body, from); p != NULL; p = strstr(p + 1, from))
		n++;
	body = dlock__malloc(len + n + 1);
	if (t == NULL || body == NULL) {
		dlock__free(t);
		dlock__free(body);
		return;
	}
	for (p = s->body, w = body; *p != '\0';) {
		if (strncmp(p, from, sizeof(from) - 1) == 0) {
			memcpy(w, to, sizeof(to) - 1);
			w += sizeof(to) - 1;
			p += sizeof(from) - 1;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
	t->name = s->name;
	t->body = body;
	t->registers = s->registers;
	t->once = (pthread_once_t)PTHREAD_ONCE_INIT;
	t->sharded_once = (pthread_once_t)PTHREAD_ONCE_INIT;
	s->sharded = t;
}

dlock__script *dlock__script_for(dlock__script *s, const dlock__node *node)
{
	if (!node->sharded_pubsub || strstr(s->body, "'publish'") == NULL)
		return s;
	twinning = s;
	pthread_once(&s->sharded_once, make_sharded);
	return s->sharded != NULL ? s->sharded : s;
}

int dlock__script_argv(dlock__script *s, int nkeys, const char *const *keys, const size_t *key_lens,
		int nargs, const char *const *args, const size_t *arg_lens, const char **argv,
		size_t *lens, char numbuf[16])
{
	int i, n = 0;

	argv[n] = "EVALSHA";
	lens[n++] = 7;
	argv[n] = script_sha(s);
	lens[n++] = 40;
	argv[n] = numbuf;
	lens[n++] = dlock__fmt_i64(numbuf, nkeys);
	for (i = 0; i < nkeys; i++) {
		argv[n] = keys[i];
		lens[n++] = key_lens ? key_lens[i] : strlen(keys[i]);
	}
	for (i = 0; i < nargs; i++) {
		argv[n] = args[i];
		lens[n++] = arg_lens ? arg_lens[i] : strlen(args[i]);
	}
	return n;
}

void dlock__script_argv_to_eval(dlock__script *s, const char **argv, size_t *lens)
{
	argv[0] = "EVAL";
	lens[0] = 4;
	argv[1] = s->body;
	lens[1] = strlen(s->body);
}
