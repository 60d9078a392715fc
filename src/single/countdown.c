/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The countdown latch handle (Redisson's RCountDownLatch) and its blocking
 * calls, each one operation of countdown_op.c driven to its end on the
 * calling thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fmt.h"
#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fields.h"
#include "core/drive/cmd_op.h"
#include "core/topology/slot.h"
#include "single/countdown_internal.h"
#include "single/lock_internal.h"
#include "single/scripts.h"

static const dlock_countdown_options defaults = DLOCK_COUNTDOWN_OPTIONS_INIT;
static const dlock__field fields[] = {
	DLOCK__FIELD(dlock_countdown_options, report_missing, 2),
};
static const dlock__versioned versioned = DLOCK__VERSIONED("countdown options",
		"DLOCK_COUNTDOWN_OPTIONS_INIT", DLOCK_COUNTDOWN_OPTIONS_VERSION,
		dlock_countdown_options, &defaults, fields);

/* Redisson names the channel with braces around the name whatever it holds
 * (not prefixName's rule: a name with '{' gets a second pair). */
static const char channel_prefix[] = "redisson_countdownlatch__channel__{";

int dlock_countdown_options_init(dlock_countdown_options *opts, unsigned int version)
{
	return dlock__versioned_init(opts, version, &versioned);
}

static int check_name(const char *name, size_t *out_len)
{
	size_t len;

	if (name == NULL || name[0] == '\0')
		return dlock__seterr(
				DLOCK_EINVAL, "latch: the name is %s", name ? "empty" : "NULL");
	len = strnlen(name, DLOCK__NAME_MAX + 1);
	if (len > DLOCK__NAME_MAX)
		return dlock__seterr(DLOCK_EINVAL, "latch: the name is longer than %d bytes",
				DLOCK__NAME_MAX);
	*out_len = len;
	return 0;
}

static int make_names(dlock_countdown *c, const char *name, size_t len)
{
	size_t plen = sizeof(channel_prefix) - 1;

	c->name = dlock__strndup(name, len);
	c->name_len = len;
	c->channel_len = plen + len + 1;
	c->channel = dlock__malloc(c->channel_len + 1);
	if (c->name == NULL || c->channel == NULL)
		return -1;
	memcpy(c->channel, channel_prefix, plen);
	memcpy(c->channel + plen, name, len);
	c->channel[plen + len] = '}';
	c->channel[c->channel_len] = '\0';
	dlock__shown_name(c->shown, sizeof(c->shown), name, len);
	return 0;
}

/* In a cluster the scripts touch the key and publish on the channel: both
 * must be in one slot (else Redis refuses them: CROSSSLOT). */
static int check_slots(const dlock_countdown *c)
{
	if (c->client->node.cluster == NULL ||
			dlock__key_slot(c->name, c->name_len) ==
					dlock__key_slot(c->channel, c->channel_len))
		return 0;
	return dlock__seterr(DLOCK_EINVAL,
			"latch %s: in a cluster its key and its channel %s hash to different "
			"slots (Redis refuses such a script: CROSSSLOT); Redisson puts braces "
			"around the whole name, so use a name without '{' or '}'",
			c->shown, "redisson_countdownlatch__channel__{<name>}");
}

int dlock_countdown_new(dlock_countdown **out, dlock_client *client, const char *name,
		const dlock_countdown_options *opts)
{
	dlock_countdown_options o;
	dlock_countdown *c;
	size_t len = 0;
	int rc;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "latch: out is NULL");
	*out = NULL;
	if (client == NULL)
		return dlock__seterr(DLOCK_EINVAL, "latch: client is NULL");
	if ((rc = dlock__versioned_load(&o, opts, &versioned)) < 0 ||
			(rc = check_name(name, &len)) < 0)
		return rc;
	c = dlock__calloc(1, sizeof(*c));
	if (c == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "latch: out of memory");
	if (dlock__errbuf_init(&c->err) != 0)
		abort();
	atomic_init(&c->refs, 1);
	c->client = client;
	c->report_missing = o.report_missing != 0;
	dlock__client_handle_added(client, 1); /* the client stays while it lives */
	if (make_names(c, name, len) < 0) {
		dlock__countdown_unref(c);
		return dlock__seterr(DLOCK_ENOMEM, "latch: out of memory");
	}
	if ((rc = check_slots(c)) < 0) {
		dlock__countdown_unref(c);
		return rc;
	}
	*out = c;
	return 0;
}

void dlock_countdown_free(dlock_countdown *c)
{
	if (c != NULL)
		dlock__countdown_unref(c);
}

void dlock__countdown_unref(dlock_countdown *c)
{
	if (atomic_fetch_sub(&c->refs, 1) > 1)
		return;
	dlock__free(c->name);
	dlock__free(c->channel);
	dlock__errbuf_destroy(&c->err);
	dlock__client_handle_added(c->client, -1);
	dlock__free(c);
}

const char *dlock_countdown_name(const dlock_countdown *c)
{
	return c ? c->name : "";
}

const char *dlock_countdown_errmsg(const dlock_countdown *c)
{
	return c ? dlock__errbuf_read(&c->err) : "";
}

size_t dlock_countdown_errmsg_r(char *buf, size_t len, const dlock_countdown *c)
{
	return c ? dlock__errbuf_read_r(buf, len, &c->err) : dlock__copy_msg(buf, len, "");
}

int dlock_countdown_try_set_count(int *set, dlock_countdown *c, int64_t count)
{
	int64_t v = 0;
	int rc = dlock__countdown_block(c, DLOCK__LATCH_SET, count, &v);

	if (set != NULL)
		*set = rc == 0 && v == 1;
	return rc;
}

int dlock_countdown_count_down(int64_t *left, dlock_countdown *c)
{
	int64_t v = 0;
	int rc = dlock__countdown_block(c, DLOCK__LATCH_DOWN, 0, &v);

	if (left != NULL)
		*left = rc == 0 ? v : 0;
	return rc;
}

int dlock_countdown_count(int64_t *count, dlock_countdown *c)
{
	if (c == NULL)
		return dlock__seterr(DLOCK_EINVAL, "latch: NULL handle");
	if (count == NULL)
		return dlock__errbuf_record(&c->err,
				dlock__seterr(DLOCK_EINVAL, "latch %s: count is NULL", c->shown));
	*count = 0;
	return dlock__countdown_block(c, DLOCK__LATCH_COUNT, 0, count);
}

/* KEYS: the count (it routes the call to the server of the latch). ARGV:
 * the channel. Reply: clients listening on it. */
static dlock__script script_waiters = DLOCK__SCRIPT("latch waiters",
		DLOCK__LUA_LISTENERS
		"return listeners(ARGV[1]);");

static void waiters_unref(void *c)
{
	dlock__countdown_unref(c);
}

static const dlock__cmd_kind kind_waiters = { "dlock_countdown_subscribers", NULL, dlock__cmd_judge_int,
	NULL, waiters_unref, 0, 0 };

/* The op of a waiters call on c, not yet started: one read-only script call. */
static int waiters_new(dlock__cmd_op **out, dlock_countdown *c, dlock_op_cb cb, void *userdata)
{
	dlock__cmd_op *o;
	int rc;

	*out = NULL;
	if (c == NULL)
		return dlock__seterr(DLOCK_EINVAL, "latch: NULL handle");
	atomic_fetch_add(&c->refs, 1); /* the handle outlives the op, freed or not */
	rc = dlock__cmd_op_new(&o, sizeof(*o), &kind_waiters, c, c->client, &c->err, c->shown, cb,
			userdata);
	if (rc < 0)
		return rc;
	dlock__call_begin(&o->call, &script_waiters);
	dlock__call_push(&o->call, c->name, c->name_len);
	dlock__call_keys_done(&o->call);
	dlock__call_push(&o->call, c->channel, c->channel_len);
	*out = o;
	return 0;
}

int dlock_countdown_subscribers(int64_t *waiters, dlock_countdown *c)
{
	dlock__cmd_op *o;
	int rc;

	if (c != NULL && waiters == NULL)
		return dlock__errbuf_record(&c->err,
				dlock__seterr(DLOCK_EINVAL, "latch %s: waiters is NULL", c->shown));
	if (waiters != NULL)
		*waiters = 0;
	if ((rc = waiters_new(&o, c, dlock__cmd_blocking, NULL)) < 0)
		return rc;
	return dlock__cmd_op_block(o, waiters, NULL);
}

int dlock_countdown_subscribers_async(
		dlock_op **out, dlock_countdown *c, dlock_op_cb cb, void *userdata)
{
	dlock__cmd_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	if ((rc = waiters_new(&o, c, cb, userdata)) < 0)
		return rc;
	return dlock__cmd_op_submit(o, out);
}

int dlock_countdown_delete(int *deleted, dlock_countdown *c)
{
	int64_t v = 0;
	int rc = dlock__countdown_block(c, DLOCK__LATCH_DELETE, 0, &v);

	if (deleted != NULL)
		*deleted = rc == 0 && v == 1;
	return rc;
}

int dlock_countdown_await(dlock_countdown *c, int64_t wait_ms)
{
	return dlock__countdown_block(c, DLOCK__LATCH_AWAIT, wait_ms, NULL);
}
