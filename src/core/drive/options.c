/* SPDX-License-Identifier: BSD-3-Clause */
/* Client options: defaults, the caller's copied per version, and checked. */
#include "dlock/errors.h"
#include "core/drive/client.h"
#include "core/base/error.h"
#include "core/base/fields.h"

/* The longest time option accepted: a day (beyond that it is surely a bug). */
#define TIME_MAX_MS (24 * 3600 * 1000LL)

/* The fields after `version`, and the version that added each. */
static const dlock__field fields[] = {
	DLOCK__FIELD(dlock_client_options, connect_timeout_ms, 1),
	DLOCK__FIELD(dlock_client_options, command_timeout_ms, 1),
	DLOCK__FIELD(dlock_client_options, watchdog_timeout_ms, 1),
	DLOCK__FIELD(dlock_client_options, pool_size, 1),
	DLOCK__FIELD(dlock_client_options, lazy_connect, 1),
	DLOCK__FIELD(dlock_client_options, tls_ca_file, 2),
	DLOCK__FIELD(dlock_client_options, tls_ca_dir, 2),
	DLOCK__FIELD(dlock_client_options, tls_cert_file, 2),
	DLOCK__FIELD(dlock_client_options, tls_key_file, 2),
	DLOCK__FIELD(dlock_client_options, tls_server_name, 2),
	DLOCK__FIELD(dlock_client_options, tls_insecure, 2),
	DLOCK__FIELD(dlock_client_options, sentinel_user, 3),
	DLOCK__FIELD(dlock_client_options, sentinel_password, 3),
	DLOCK__FIELD(dlock_client_options, sync_replicas, 3),
	DLOCK__FIELD(dlock_client_options, sync_timeout_ms, 3),
	DLOCK__FIELD(dlock_client_options, first_contact_timeout_ms, 4),
	DLOCK__FIELD(dlock_client_options, watch_force_unlock, 4),
	DLOCK__FIELD(dlock_client_options, loop, 5),
	DLOCK__FIELD(dlock_client_options, label, 6),
	DLOCK__FIELD(dlock_client_options, command, 6),
	DLOCK__FIELD(dlock_client_options, on_event, 6),
	DLOCK__FIELD(dlock_client_options, event_userdata, 6),
	DLOCK__FIELD(dlock_client_options, sync_aof, 6),
};
static const dlock_client_options defaults = DLOCK_CLIENT_OPTIONS_INIT;
static const dlock__versioned versioned = DLOCK__VERSIONED("client options",
		"DLOCK_CLIENT_OPTIONS_INIT", DLOCK_CLIENT_OPTIONS_VERSION, dlock_client_options,
		&defaults, fields);

int dlock_client_options_init(dlock_client_options *opts, unsigned int version)
{
	return dlock__versioned_init(opts, version, &versioned);
}

int dlock__client_options_copy(dlock_client_options *dst, const dlock_client_options *src)
{
	return dlock__versioned_load(dst, src, &versioned);
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
			(rc = check_time("watchdog_timeout_ms", o->watchdog_timeout_ms, 3)) < 0 ||
			(rc = check_time("sync_timeout_ms", o->sync_timeout_ms, 1)) < 0 ||
			(rc = check_time("first_contact_timeout_ms", o->first_contact_timeout_ms,
					 0)) < 0)
		return rc;
	if (o->watch_force_unlock != 0 && o->watch_force_unlock != 1)
		return dlock__seterr(DLOCK_EINVAL,
				"options: watch_force_unlock must be 0 or 1 (got %d)",
				o->watch_force_unlock);
	if (o->pool_size < 1 || o->pool_size > 1024)
		return dlock__seterr(DLOCK_EINVAL, "options: pool_size must be 1..1024 (got %d)",
				o->pool_size);
	if (o->lazy_connect != 0 && o->lazy_connect != 1)
		return dlock__seterr(DLOCK_EINVAL, "options: lazy_connect must be 0 or 1 (got %d)",
				o->lazy_connect);
	if (o->tls_insecure != 0 && o->tls_insecure != 1)
		return dlock__seterr(DLOCK_EINVAL, "options: tls_insecure must be 0 or 1 (got %d)",
				o->tls_insecure);
	if (o->sync_replicas < 0 || o->sync_replicas > 1024)
		return dlock__seterr(DLOCK_EINVAL,
				"options: sync_replicas must be 0..1024 (got %d)",
				o->sync_replicas);
	if (o->sync_aof < 0 || o->sync_aof > 1024)
		return dlock__seterr(DLOCK_EINVAL, "options: sync_aof must be 0..1024 (got %d)",
				o->sync_aof);
	if (o->sync_aof > 0 && o->sync_replicas > o->sync_aof)
		return dlock__seterr(DLOCK_EINVAL,
				"options: sync_replicas (%d) above sync_aof (%d): WAITAOF replaces "
				"WAIT, so ask sync_aof for that many replicas",
				o->sync_replicas, o->sync_aof);
	if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL))
		return dlock__seterr(DLOCK_EINVAL,
				"options: tls_cert_file and tls_key_file go together (mutual TLS needs "
				"both)");
	return 0;
}
