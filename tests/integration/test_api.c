/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The API's contract beyond locking: versioned structs (options, member
 * status, allocator) accept every version this library knows and refuse
 * others with a message; a client freed while lock handles live stays
 * for them (the last goes with it); the _r message getters copy and report
 * the full length; every DLOCK_EINVAL comes with a message.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <dlock.h>

#include "redis_harness.h"

static rh_server *srv;

static void start(void)
{
	srv = rh_server_start(NULL);
	cr_assert_not_null(srv, "redis-server did not start");
}

static void stop(void)
{
	rh_server_free(srv);
	rh_cleanup_all();
}

TestSuite(api, .init = start, .fini = stop);

Test(api, client_options_accept_known_versions_only)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	cr_assert_eq(dlock_client_options_init(&o, 0), DLOCK_EINVAL);
	cr_assert_neq(strstr(dlock_errmsg_last(), "unknown version 0"), NULL, "%s",
			dlock_errmsg_last());
	cr_assert_eq(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION + 1), DLOCK_EINVAL);
	cr_assert_eq(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION), 0);
	o.version = DLOCK_CLIENT_OPTIONS_VERSION + 1;
	cr_assert_eq(dlock_client_new(&c, rh_server_uri(srv), &o), DLOCK_EINVAL);
	cr_assert_null(c);
	cr_assert_neq(strstr(dlock_errmsg_last(), "DLOCK_CLIENT_OPTIONS_INIT"), NULL, "%s",
			dlock_errmsg_last());
	o.version = 1;
	o.command_timeout_ms = 25LL * 3600 * 1000; /* int64_t: no silent truncation */
	cr_assert_eq(dlock_client_new(&c, rh_server_uri(srv), &o), DLOCK_EINVAL);
	cr_assert_neq(strstr(dlock_errmsg_last(), "command_timeout_ms"), NULL);
	o.command_timeout_ms = 500;
	cr_assert_eq(dlock_client_new(&c, rh_server_uri(srv), &o), 0, "%s", dlock_errmsg_last());
	dlock_client_free(c);
}

/* A program built against version 1's header passes a struct that ends at
 * lazy_connect: the library must read no further (ASan would see it) and
 * give the later fields their defaults. */
typedef struct options_v1 {
	unsigned int version;
	int64_t connect_timeout_ms, command_timeout_ms, watchdog_timeout_ms;
	int pool_size;
	int lazy_connect;
} options_v1;

Test(api, version_1_options_are_read_as_far_as_they_go)
{
	options_v1 *v1 = malloc(sizeof *v1); /* exactly version 1's size */
	dlock_client *c = NULL;

	cr_assert_not_null(v1);
	*v1 = (options_v1){ 1, 500, 500, 30000, 2, 0 };
	cr_assert_eq(dlock_client_new(&c, rh_server_uri(srv), (const dlock_client_options *)v1),
			0, "%s", dlock_errmsg_last());
	dlock_client_free(c);
	free(v1);
}

Test(api, redlock_options_accept_known_versions_only)
{
	dlock_redlock_options ro;
	const char *uris[1];
	dlock_redlock *rl = NULL;

	uris[0] = rh_server_uri(srv);
	cr_assert_eq(dlock_redlock_options_init(&ro, DLOCK_REDLOCK_OPTIONS_VERSION + 1),
			DLOCK_EINVAL);
	cr_assert_eq(dlock_redlock_options_init(&ro, DLOCK_REDLOCK_OPTIONS_VERSION), 0);
	cr_assert_eq(ro.restart_guard_ms, -1, "the defaults are filled in");
	ro.version = 0;
	cr_assert_eq(dlock_redlock_new_from_uris(&rl, uris, 1, "api-ro", NULL, &ro), DLOCK_EINVAL);
	cr_assert_null(rl);
	ro.version = DLOCK_REDLOCK_OPTIONS_VERSION;
	cr_assert_eq(dlock_redlock_new_from_uris(&rl, uris, 1, "api-ro", NULL, &ro), 0, "%s",
			dlock_errmsg_last());
	dlock_redlock_free(rl);
}

Test(api, a_client_freed_before_its_lock_handles_stays_for_them)
{
	dlock_client *c = NULL;
	dlock_lock *l = NULL;

	cr_assert_eq(dlock_client_new(&c, rh_server_uri(srv), NULL), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_lock_new(&l, c, "api-busy", NULL), 0);
	dlock_client_free(c);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 5000), 0, "the client still works: %s",
			dlock_lock_errmsg(l));
	cr_assert_eq(dlock_lock_release(l, NULL), 0);
	dlock_lock_free(l); /* the client goes with it */
	dlock_client_free(NULL);
}

Test(api, errmsg_r_copies_truncates_and_reports_the_full_length)
{
	dlock_client *c = NULL;
	char big[512], small[8];
	size_t n;

	cr_assert_eq(dlock_client_new(&c, "redis://", NULL), DLOCK_EINVAL);
	n = dlock_errmsg_last_r(big, sizeof(big));
	cr_assert_eq(n, strlen(dlock_errmsg_last()));
	cr_assert_str_eq(big, dlock_errmsg_last());
	cr_assert_gt(n, sizeof(small), "the message is longer than the small buffer");
	cr_assert_eq(dlock_errmsg_last_r(small, sizeof(small)), n);
	cr_assert_eq(strlen(small), sizeof(small) - 1, "truncated and terminated");
	cr_assert_eq(strncmp(small, big, sizeof(small) - 1), 0);
	cr_assert_eq(dlock_errmsg_last_r(NULL, 0), n, "a NULL buffer asks for the length");
}

Test(api, member_status_needs_a_known_version)
{
	dlock_client *c = NULL;
	dlock_lock *l = NULL;
	dlock_redlock *rl = NULL;
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;

	cr_assert_eq(dlock_client_new(&c, rh_server_uri(srv), NULL), 0);
	cr_assert_eq(dlock_lock_new(&l, c, "api-status", NULL), 0);
	cr_assert_eq(dlock_redlock_new(&rl, &l, 1, NULL), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_redlock_acquire(rl, NULL, 0, 5000), 0, "%s", dlock_redlock_errmsg(rl));
	cr_assert_eq(dlock_redlock_member_status(&st, rl, 0), 0);
	cr_assert_eq(st.vote, DLOCK_VOTE_ACQUIRED);
	cr_assert_str_eq(st.node, dlock_client_node(c));
	st.version = 0;
	cr_assert_eq(dlock_redlock_member_status(&st, rl, 0), DLOCK_EINVAL);
	cr_assert_neq(strstr(dlock_errmsg_last(), "DLOCK_MEMBER_STATUS_INIT"), NULL);
	st.version = DLOCK_MEMBER_STATUS_VERSION;
	cr_assert_eq(dlock_redlock_member_status(&st, rl, 1), DLOCK_EINVAL);
	cr_assert_neq(strstr(dlock_errmsg_last(), "no such member"), NULL);
	cr_assert_eq(dlock_redlock_release(rl, NULL), 0);
	dlock_redlock_free(rl);
	dlock_lock_free(l);
	dlock_client_free(c);
}

Test(api, allocator_needs_a_known_version)
{
	dlock_allocator a = { DLOCK_ALLOCATOR_VERSION + 1, malloc, realloc, free };

	cr_assert_eq(dlock_set_allocator(&a), DLOCK_EINVAL);
	cr_assert_neq(strstr(dlock_errmsg_last(), "unknown version"), NULL);
	a.version = DLOCK_ALLOCATOR_VERSION;
	a.free_fn = NULL;
	cr_assert_eq(dlock_set_allocator(&a), DLOCK_EINVAL);
	a.free_fn = free;
	cr_assert_eq(dlock_set_allocator(&a), 0);
	cr_assert_eq(dlock_set_allocator(NULL), 0);
}

Test(api, allocator_init_fills_the_standard_functions)
{
	dlock_allocator a = DLOCK_ALLOCATOR_INIT;

	cr_assert_eq(a.version, DLOCK_ALLOCATOR_VERSION);
	cr_assert_null(a.malloc_fn, "INIT leaves the functions to the caller");
	cr_assert_eq(dlock_set_allocator(&a), DLOCK_EINVAL, "a NULL function is refused");
	cr_assert_eq(dlock_allocator_init(&a, DLOCK_ALLOCATOR_VERSION), 0);
	cr_assert_eq(a.version, DLOCK_ALLOCATOR_VERSION);
	cr_assert(a.malloc_fn == malloc && a.realloc_fn == realloc && a.free_fn == free);
	cr_assert_eq(dlock_set_allocator(&a), 0);
	cr_assert_eq(dlock_allocator_init(&a, DLOCK_ALLOCATOR_VERSION + 1), DLOCK_EINVAL);
	cr_assert_eq(dlock_allocator_init(NULL, DLOCK_ALLOCATOR_VERSION), DLOCK_EINVAL);
}

Test(api, member_status_init_is_the_init_macro)
{
	dlock_member_status want = DLOCK_MEMBER_STATUS_INIT, st;

	memset(&st, 0x5a, sizeof st);
	cr_assert_eq(dlock_member_status_init(&st, DLOCK_MEMBER_STATUS_VERSION), 0);
	cr_assert_eq(st.version, want.version);
	cr_assert_null(st.node);
	cr_assert_eq(st.vote, want.vote);
	cr_assert_eq(st.error, want.error);
	cr_assert_eq(st.ttl_ms, want.ttl_ms);
	cr_assert_eq(st.uptime_s, want.uptime_s);
	cr_assert_str_eq(st.message, "");
	cr_assert_eq(dlock_member_status_init(&st, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_member_status_init(NULL, DLOCK_MEMBER_STATUS_VERSION), DLOCK_EINVAL);
}

static void no_watch(void *userdata, int fd, int what)
{
	(void)userdata;
	(void)fd;
	(void)what;
}

static void no_timer(void *userdata, int64_t ms)
{
	(void)userdata;
	(void)ms;
}

Test(api, loop_keeps_the_message_of_its_last_failure)
{
	dlock_loop_options o = DLOCK_LOOP_OPTIONS_INIT;
	dlock_loop *hooked = NULL, *own = NULL;
	char big[512], small[8];
	size_t n;

	o.watch_fd = no_watch;
	o.set_timer = no_timer;
	cr_assert_eq(dlock_loop_new(&hooked, &o), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_loop_new(&own, NULL), 0, "%s", dlock_errmsg_last());
	cr_assert_str_eq(dlock_loop_errmsg(hooked), "", "no failure yet");
	cr_assert_eq(dlock_loop_run(hooked, 0), DLOCK_EINVAL, "a loop with callbacks is not run");
	(void)dlock_errmsg_last_r(big, sizeof(big));
	cr_assert_eq(dlock_loop_run(own, 0), 0, "another loop's call clears the thread's message");
	cr_assert_neq(strstr(dlock_loop_errmsg(hooked), "without callbacks"), NULL, "%s",
			dlock_loop_errmsg(hooked));
	cr_assert_str_eq(dlock_loop_errmsg(hooked), big, "the loop keeps what the call said");
	cr_assert_str_eq(dlock_loop_errmsg(own), "");
	n = dlock_loop_errmsg_r(big, sizeof(big), hooked);
	cr_assert_eq(n, strlen(big));
	cr_assert_eq(dlock_loop_errmsg_r(small, sizeof(small), hooked), n, "the full length");
	cr_assert_eq(strlen(small), sizeof(small) - 1, "truncated and terminated");
	cr_assert_eq(dlock_loop_errmsg_r(small, sizeof(small), NULL), 0);
	cr_assert_str_eq(small, "");
	dlock_loop_free(own);
	dlock_loop_free(hooked);
}

Test(api, semaphore_errmsg_r_copies_the_handle_message)
{
	dlock_client *c = NULL;
	dlock_semaphore *s = NULL;
	char big[512], small[8];
	size_t n;

	cr_assert_eq(dlock_client_new(&c, rh_server_uri(srv), NULL), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_semaphore_new(&s, c, "api-sem-msg", NULL), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_semaphore_errmsg_r(big, sizeof(big), s), 0, "no failure yet");
	cr_assert_str_eq(big, "");
	cr_assert_eq(dlock_semaphore_available(NULL, s), DLOCK_EINVAL);
	n = dlock_semaphore_errmsg_r(big, sizeof(big), s);
	cr_assert_neq(strstr(big, "out is NULL"), NULL, "%s", big);
	cr_assert_eq(n, strlen(big));
	cr_assert_str_eq(big, dlock_semaphore_errmsg(s));
	cr_assert_eq(dlock_semaphore_errmsg_r(small, sizeof(small), s), n, "the full length");
	cr_assert_eq(strlen(small), sizeof(small) - 1, "truncated and terminated");
	cr_assert_eq(dlock_semaphore_errmsg_r(NULL, 0, s), n, "a NULL buffer asks for the length");
	dlock_semaphore_free(s);
	dlock_client_free(c);
}

Test(api, owner_writers_fill_an_owner_size_array)
{
	dlock_client *c = NULL;
	char owner[DLOCK_OWNER_SIZE];

	cr_assert_eq(dlock_client_new(&c, rh_server_uri(srv), NULL), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_client_owner(owner, c, UINT64_MAX), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(strlen(owner), 36 + 1 + 20, "the longest owner fits, NUL included");
	cr_assert_eq(strncmp(owner, dlock_client_id(c), 36), 0);
	cr_assert_str_eq(owner + 36, ":18446744073709551615");
	cr_assert_eq(dlock_client_owner(NULL, c, 1), DLOCK_EINVAL);
	cr_assert_eq(dlock_client_owner(owner, NULL, 1), DLOCK_EINVAL);
	dlock_client_free(c);
}
