/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The event-loop adapters' own API, compiled into libdlock-uv.a and
 * libdlock-libevent.a (dlock/uv.h, dlock/libevent.h): the options struct
 * and its version, NULL for the defaults, the argument errors, and that an
 * adapter freed with no client open leaves its loop with nothing to run -
 * uv_run() and event_base_dispatch() return, uv_loop_close() finds no
 * handle. (test_loop_adapters drives real locks through them.)
 */
#include <criterion/criterion.h>

#include <dlock.h>

TestSuite(loop_adapters_api, .timeout = 30);

#ifdef DLOCK_HAVE_UV
#include <dlock/uv.h>

Test(loop_adapters_api, libuv_options_have_a_version_and_null_means_defaults)
{
	dlock_uv_options o = DLOCK_UV_OPTIONS_INIT, bad = DLOCK_UV_OPTIONS_INIT;
	dlock_uv *du = (dlock_uv *)&o; /* not NULL: a failure must clear it */
	uv_loop_t uv;

	cr_assert_eq(o.version, DLOCK_UV_OPTIONS_VERSION);
	cr_assert_eq(dlock_uv_options_init(&o, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_uv_options_init(&o, DLOCK_UV_OPTIONS_VERSION + 1), DLOCK_EINVAL);
	cr_assert_eq(dlock_uv_options_init(NULL, DLOCK_UV_OPTIONS_VERSION), DLOCK_EINVAL);
	o.version = 0;
	cr_assert_eq(dlock_uv_options_init(&o, DLOCK_UV_OPTIONS_VERSION), 0);
	cr_assert_eq(o.version, DLOCK_UV_OPTIONS_VERSION);

	cr_assert_eq(uv_loop_init(&uv), 0);
	bad.version = DLOCK_UV_OPTIONS_VERSION + 1;
	cr_assert_eq(dlock_uv_new(&du, &uv, &bad), DLOCK_EINVAL);
	cr_assert_null(du);
	cr_assert_eq(dlock_uv_new(&du, NULL, NULL), DLOCK_EINVAL);
	cr_assert_eq(dlock_uv_new(NULL, &uv, NULL), DLOCK_EINVAL);
	/* Nothing was made: the loop has no handle to close. */
	cr_assert_eq(uv_run(&uv, UV_RUN_NOWAIT), 0);

	cr_assert_eq(dlock_uv_new(&du, &uv, NULL), 0);
	cr_assert_not_null(du);
	cr_assert_not_null(dlock_uv_loop(du));
	dlock_uv_free(du);
	dlock_uv_free(NULL);
	cr_assert_eq(dlock_uv_new(&du, &uv, &o), 0);
	dlock_uv_free(du);
	/* Both adapters' handles close; then nothing is left open. */
	cr_assert_eq(uv_run(&uv, UV_RUN_DEFAULT), 0);
	cr_assert_eq(uv_loop_close(&uv), 0, "the adapter left a libuv handle open");
}
#else
Test(loop_adapters_api, libuv_adapter_not_built)
{
	cr_skip_test("libdlock-uv.a was not built (libuv not found)");
}
#endif

#ifdef DLOCK_HAVE_LIBEVENT
#include <dlock/libevent.h>

Test(loop_adapters_api, libevent_options_have_a_version_and_null_means_defaults)
{
	dlock_libevent_options o = DLOCK_LIBEVENT_OPTIONS_INIT, bad = DLOCK_LIBEVENT_OPTIONS_INIT;
	dlock_libevent *de = (dlock_libevent *)&o;
	struct event_base *base = event_base_new();

	cr_assert_not_null(base);
	cr_assert_eq(o.version, DLOCK_LIBEVENT_OPTIONS_VERSION);
	cr_assert_eq(dlock_libevent_options_init(&o, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_libevent_options_init(&o, DLOCK_LIBEVENT_OPTIONS_VERSION + 1), DLOCK_EINVAL);
	o.version = 0;
	cr_assert_eq(dlock_libevent_options_init(&o, DLOCK_LIBEVENT_OPTIONS_VERSION), 0);
	cr_assert_eq(o.version, DLOCK_LIBEVENT_OPTIONS_VERSION);

	bad.version = 0;
	cr_assert_eq(dlock_libevent_new(&de, base, &bad), DLOCK_EINVAL);
	cr_assert_null(de);
	cr_assert_eq(dlock_libevent_new(&de, NULL, NULL), DLOCK_EINVAL);
	cr_assert_eq(dlock_libevent_new(NULL, base, NULL), DLOCK_EINVAL);

	cr_assert_eq(dlock_libevent_new(&de, base, NULL), 0);
	cr_assert_not_null(dlock_libevent_loop(de));
	/* While it exists, its events keep the dispatch going. */
	cr_assert_gt(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
	dlock_libevent_free(de);
	dlock_libevent_free(NULL);
	cr_assert_eq(dlock_libevent_new(&de, base, &o), 0);
	dlock_libevent_free(de);
	/* Freed with no client: every event is gone, the dispatch has nothing to run. */
	cr_assert_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
	cr_assert_eq(event_base_dispatch(base), 1);
	event_base_free(base);
}
#else
Test(loop_adapters_api, libevent_adapter_not_built)
{
	cr_skip_test("libdlock-libevent.a was not built (libevent not found)");
}
#endif
