/* SPDX-License-Identifier: BSD-3-Clause */
/* Client options: defaults, the caller's copied per version, and checked. */
#include "dlock/errors.h"
#include "core/client.h"
#include "core/error.h"

/* The longest time option accepted: a day (beyond that it is surely a bug). */
#define TIME_MAX_MS (24 * 3600 * 1000LL)

/* Version 2's fields: TLS. */
static void copy_v2(dlock_client_options *dst, const dlock_client_options *src)
{
	dst->tls_ca_file = src->tls_ca_file;
	dst->tls_ca_dir = src->tls_ca_dir;
	dst->tls_cert_file = src->tls_cert_file;
	dst->tls_key_file = src->tls_key_file;
	dst->tls_server_name = src->tls_server_name;
	dst->tls_insecure = src->tls_insecure;
}

int dlock_client_options_init(dlock_client_options *opts, unsigned int version)
{
	dlock_client_options defaults = DLOCK_CLIENT_OPTIONS_INIT;

	if (opts == NULL)
		return dlock__seterr(DLOCK_EINVAL, "client options: NULL");
	if (version == 0 || version > DLOCK_CLIENT_OPTIONS_VERSION)
		return dlock__seterr(DLOCK_EINVAL,
				"client options: unknown version %u (this "
				"library knows 1..%d)",
				version, DLOCK_CLIENT_OPTIONS_VERSION);
	/* Version 1's fields; a later version adds its own below, so a caller
	 * built against older headers never has more written than it has. */
	opts->version = version;
	opts->connect_timeout_ms = defaults.connect_timeout_ms;
	opts->command_timeout_ms = defaults.command_timeout_ms;
	opts->watchdog_timeout_ms = defaults.watchdog_timeout_ms;
	opts->pool_size = defaults.pool_size;
	opts->lazy_connect = defaults.lazy_connect;
	if (version >= 2)
		copy_v2(opts, &defaults);
	return 0;
}

/*
 * The caller's options into *dst, field by field as far as its version has
 * them; the fields of later versions keep their defaults.
 */
int dlock__client_options_copy(dlock_client_options *dst, const dlock_client_options *src)
{
	dlock_client_options defaults = DLOCK_CLIENT_OPTIONS_INIT;

	*dst = defaults;
	if (src == NULL)
		return 0;
	if (src->version == 0 || src->version > DLOCK_CLIENT_OPTIONS_VERSION)
		return dlock__seterr(DLOCK_EINVAL,
				"options: unknown version %u (this library "
				"knows 1..%d): initialise them with DLOCK_CLIENT_OPTIONS_INIT",
				src->version, DLOCK_CLIENT_OPTIONS_VERSION);
	dst->connect_timeout_ms = src->connect_timeout_ms;
	dst->command_timeout_ms = src->command_timeout_ms;
	dst->watchdog_timeout_ms = src->watchdog_timeout_ms;
	dst->pool_size = src->pool_size;
	dst->lazy_connect = src->lazy_connect;
	if (src->version >= 2)
		copy_v2(dst, src);
	return 0;
}

static int check_time(const char *name, int64_t v, int64_t min)
{
	if (v >= min && v <= TIME_MAX_MS)
		return 0;
	return dlock__seterr(DLOCK_EINVAL, "options: %s must be %lld..%lld ms (got %lld)", name,
			(long long)min, (long long)TIME_MAX_MS, (long long)v);
}

int dlock__client_options_check(const dlock_client_options *o)
{
	int rc;

	if ((rc = check_time("connect_timeout_ms", o->connect_timeout_ms, 1)) < 0 ||
			(rc = check_time("command_timeout_ms", o->command_timeout_ms, 1)) < 0 ||
			(rc = check_time("watchdog_timeout_ms", o->watchdog_timeout_ms, 3)) < 0)
		return rc;
	if (o->pool_size < 1 || o->pool_size > 1024)
		return dlock__seterr(DLOCK_EINVAL, "options: pool_size must be 1..1024 (got %d)",
				o->pool_size);
	if (o->lazy_connect != 0 && o->lazy_connect != 1)
		return dlock__seterr(DLOCK_EINVAL, "options: lazy_connect must be 0 or 1 (got %d)",
				o->lazy_connect);
	if (o->tls_insecure != 0 && o->tls_insecure != 1)
		return dlock__seterr(DLOCK_EINVAL, "options: tls_insecure must be 0 or 1 (got %d)",
				o->tls_insecure);
	if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL))
		return dlock__seterr(DLOCK_EINVAL,
				"options: tls_cert_file and tls_key_file go together (mutual TLS needs "
				"both)");
	return 0;
}
