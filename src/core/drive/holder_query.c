/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_holder(): reading a registration (core/drive/holder.h). */
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/drive/client.h"
#include "core/drive/holder.h"

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

/* `key=value\n` lines; keys it does not know are a later version's: skipped. */
static void parse(dlock_holder *out, const char *s, size_t n)
{
	const char *end = s + n;

	memset(out, 0, sizeof(*out));
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

int dlock_client_holder(dlock_holder *out, dlock_client *c, const char *owner)
{
	char uuid[37], key[sizeof(DLOCK__HOLDER_PREFIX) + 36];
	const char *argv[2] = { "GET", key };
	size_t lens[2] = { 3, 0 };
	redisReply *r = NULL;
	int rc;

	if (out == NULL || c == NULL || owner == NULL)
		return dlock__seterr(DLOCK_EINVAL, "holder: NULL argument");
	if (!owner_uuid(owner, uuid))
		return 0; /* not a dlock owner: nobody registered it */
	lens[1] = (size_t)snprintf(key, sizeof(key), DLOCK__HOLDER_PREFIX "%s", uuid);
	rc = dlock__client_run(c, 2, argv, lens, 1, &r);
	if (rc == 0 && (rc = dlock__reply_check(&c->node, r, "GET")) == 0) {
		if (r->type == REDIS_REPLY_STRING) {
			parse(out, r->str, r->len);
			rc = 1;
		} else if (r->type != REDIS_REPLY_NIL) {
			rc = dlock__seterr(DLOCK_EPROTO, "%s: GET %s: not a string reply",
					c->node.label, key);
		}
	}
	freeReplyObject(r);
	return rc < 0 ? dlock__errbuf_record(&c->err, rc) : rc;
}
