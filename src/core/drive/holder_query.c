/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_holder(): reading a registration (core/drive/holder.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/drive/client.h"
#include "core/drive/cmd_op.h"
#include "core/drive/holder.h"
#include "core/base/fields.h"

/* 8-4-4-4-12 hex digits. */
static int is_uuid(const char *s, size_t len)
{
	size_t i;

	if (len != 36)
		return 0;
	for (i = 0; i < len; i++) {
		int dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != '-' : !((s[i] >= '0' && s[i] <= '9') ||
						 (s[i] >= 'a' && s[i] <= 'f') ||
						 (s[i] >= 'A' && s[i] <= 'F')))
			return 0;
	}
	return 1;
}

/* The client UUID of an owner `<uuid>:<digits>[:write]`; 0 when it is not one. */
static int owner_uuid(const char *owner, char uuid[37])
{
	size_t len = strlen(owner), i;
	const char *colon;

	if (len > 6 && strcmp(owner + len - 6, ":write") == 0)
		len -= 6;
	for (colon = NULL, i = 0; i < len; i++)
		if (owner[i] == ':')
			colon = owner + i;
	if (colon == NULL || colon + 1 == owner + len)
		return 0;
	for (i = (size_t)(colon - owner) + 1; i < len; i++)
		if (owner[i] < '0' || owner[i] > '9')
			return 0;
	if (!is_uuid(owner, (size_t)(colon - owner)))
		return 0;
	memcpy(uuid, owner, 36);
	uuid[36] = '\0';
	return 1;
}

static void copy_field(char *dst, size_t size, const char *v, size_t len)
{
	if (len >= size)
		len = size - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

static int64_t number(const char *v, size_t len)
{
	char buf[24];

	copy_field(buf, sizeof(buf), v, len);
	return strtoll(buf, NULL, 10);
}

/* The fields after `version`, and the version that added each. */
static const dlock__field holder_fields[] = {
	DLOCK__FIELD(dlock_holder, registered, 1),
	DLOCK__FIELD(dlock_holder, host, 1),
	DLOCK__FIELD(dlock_holder, pid, 1),
	DLOCK__FIELD(dlock_holder, label, 1),
	DLOCK__FIELD(dlock_holder, command, 1),
	DLOCK__FIELD(dlock_holder, since_ms, 1),
};
static const dlock_holder holder_defaults = DLOCK_HOLDER_INIT;
static const dlock__versioned holder_versioned = DLOCK__VERSIONED("holder", "DLOCK_HOLDER_INIT",
		DLOCK_HOLDER_VERSION, dlock_holder, &holder_defaults, holder_fields);

int dlock_holder_init(dlock_holder *h, unsigned int version)
{
	return dlock__versioned_init(h, version, &holder_versioned);
}

/* `key=value\n` lines; keys it does not know are a later version's: skipped. */
static void parse(dlock_holder *out, const char *s, size_t n)
{
	const char *end = s + n;

	*out = holder_defaults;
	out->registered = 1;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *line_end = nl != NULL ? nl : end;
		const char *eq = memchr(s, '=', (size_t)(line_end - s));

		if (eq != NULL) {
			size_t klen = (size_t)(eq - s), vlen = (size_t)(line_end - eq - 1);
			const char *v = eq + 1;

			if (klen == 4 && memcmp(s, "host", 4) == 0)
				copy_field(out->host, sizeof(out->host), v, vlen);
			else if (klen == 3 && memcmp(s, "pid", 3) == 0)
				out->pid = number(v, vlen);
			else if (klen == 5 && memcmp(s, "label", 5) == 0)
				copy_field(out->label, sizeof(out->label), v, vlen);
			else if (klen == 3 && memcmp(s, "cmd", 3) == 0)
				copy_field(out->command, sizeof(out->command), v, vlen);
			else if (klen == 5 && memcmp(s, "since", 5) == 0)
				out->since_ms = number(v, vlen);
		}
		s = line_end + 1;
	}
}

/* The look-up as an operation of one GET (core/drive/cmd_op.h). */
typedef struct holder_op {
	dlock__cmd_op co; /* first */
	int known;        /* the owner names a client: its registration is asked */
	char key[sizeof(DLOCK__HOLDER_PREFIX) + 36];
	dlock_holder holder;
	dlock_holder *copy_to; /* the blocking call's out */
} holder_op;

static int holder_prepare(dlock__cmd_op *co)
{
	return ((holder_op *)co)->known ? 0 : 1; /* not a dlock owner: nobody registered it */
}

static int holder_judge(dlock__cmd_op *co, const redisReply *r)
{
	holder_op *o = (holder_op *)co;

	if (r->type == REDIS_REPLY_STRING) {
		parse(&o->holder, r->str, r->len);
		co->op.result.value = 1;
		co->op.result.holder = &o->holder;
		if (o->copy_to != NULL)
			(void)dlock__versioned_store(o->copy_to, &o->holder, &holder_versioned);
	} else if (r->type != REDIS_REPLY_NIL) {
		return dlock__seterr(DLOCK_EPROTO, "%s: GET %s: not a string reply",
				co->mop.client->node.label, o->key);
	}
	return 0;
}

static void no_unref(void *c)
{
	(void)c;
}

static const dlock__cmd_kind kind_holder = { "dlock_client_holder", holder_prepare, holder_judge,
	NULL, no_unref, 0, 0 };

static int holder_new(holder_op **out, dlock_client *c, const char *owner, dlock_op_cb cb,
		void *userdata)
{
	char uuid[37];
	dlock__cmd_op *co;
	holder_op *o;
	int rc;

	*out = NULL;
	if (c == NULL || owner == NULL)
		return dlock__seterr(DLOCK_EINVAL, "holder: NULL argument");
	if ((rc = dlock__cmd_op_new(&co, sizeof(holder_op), &kind_holder, c, c, &c->err,
			     c->node.label, cb, userdata)) < 0)
		return rc;
	o = (holder_op *)co;
	o->known = owner_uuid(owner, uuid);
	co->argv[0] = "GET";
	co->lens[0] = 3;
	co->argv[1] = o->key;
	co->lens[1] = (size_t)snprintf(o->key, sizeof(o->key), DLOCK__HOLDER_PREFIX "%s",
			o->known ? uuid : "");
	co->argc = 2;
	*out = o;
	return 0;
}

int dlock_client_holder(dlock_holder *out, dlock_client *c, const char *owner)
{
	holder_op *o;
	int64_t found = 0;
	int rc;

	if ((rc = dlock__versioned_check(out, &holder_versioned)) < 0)
		return rc;
	/* Not registered until the reply says otherwise. */
	(void)dlock__versioned_store(out, &holder_defaults, &holder_versioned);
	if ((rc = holder_new(&o, c, owner, dlock__cmd_blocking, NULL)) < 0)
		return rc;
	o->copy_to = out;
	rc = dlock__cmd_op_block(&o->co, &found, NULL);
	return rc < 0 ? rc : 0; /* found is in out->registered (an answer, not a status) */
}

int dlock_client_holder_async(dlock_op **out, dlock_client *c, const char *owner, dlock_op_cb cb,
		void *userdata)
{
	holder_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	if ((rc = holder_new(&o, c, owner, cb, userdata)) < 0)
		return rc;
	return dlock__cmd_op_submit(&o->co, out);
}
