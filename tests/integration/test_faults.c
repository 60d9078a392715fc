/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Faults met by the single lock and the quorum engine under load: commands
 * sent without waiting to a server whose script cache is gone, a try whose
 * acquire runs after the client gave up on it, waits that meet transient
 * errors, and the restart guard's refusals.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <dlock.h>

#include "redis_harness.h"

#define CMD_TIMEOUT_MS 200

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static dlock_client *open_client(rh_server *s, int watchdog_ms)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_client *c = NULL;

    o.watchdog_timeout_ms = watchdog_ms;
    o.command_timeout_ms = CMD_TIMEOUT_MS;
    o.connect_timeout_ms = CMD_TIMEOUT_MS;
    cr_assert_eq(dlock_client_open(&c, rh_server_uri(s), &o), 0, "%s", dlock_errmsg_last());
    return c;
}

static dlock_lock *new_lock(dlock_client *c, const char *name)
{
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_lock_new(&l, c, name), 0, "%s", dlock_errmsg_last());
    return l;
}

/* Poll until the key is gone (1) or limit_ms passed (0). */
static int key_gone_within(rh_server *s, const char *key, int64_t limit_ms)
{
    int64_t end = rh_now_ms() + limit_ms;
    do {
        if (rh_command_int(s, "EXISTS %s", key) == 0)
            return 1;
        sleep_ms(5);
    } while (rh_now_ms() < end);
    return 0;
}

/*
 * A RedLock unlock sends its release to a server that just timed out
 * without waiting. That server's script cache was flushed meanwhile: the
 * release must still run (EVAL, not an EVALSHA whose NOSCRIPT nobody reads).
 */
Test(faults, release_sent_without_waiting_survives_script_flush, .timeout = 30)
{
    rh_server *s[3];
    dlock_client *c[3];
    dlock_lock *a[3], *b[3];
    dlock_redlock *ra = NULL;
    dlock_multilock *mb = NULL;
    dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;

    ro.restart_guard_ms = 0;
    cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
    for (int i = 0; i < 3; i++) {
        c[i] = open_client(s[i], 30000);
        a[i] = new_lock(c[i], "faults:flush:a");
        b[i] = new_lock(c[i], "faults:flush:b");
    }
    cr_assert_eq(dlock_redlock_new(&ra, a, 3, &ro), 0, "%s", dlock_errmsg_last());
    cr_assert_eq(dlock_multilock_new(&mb, b, 3), 0, "%s", dlock_errmsg_last());
    cr_assert_eq(dlock_redlock_lock(ra, DLOCK_LEASE_WATCHDOG, NULL), 0, "%s",
                 dlock_redlock_errmsg(ra));
    cr_assert_eq(rh_command_int(s[2], "EXISTS %s", "faults:flush:a"), 1);

    /* Server 2 times out once (a MultiLock waits for every member: now it
     * is "slow" for its client), then comes back with an empty script cache. */
    cr_assert_eq(rh_server_pause(s[2]), 0);
    cr_assert_neq(dlock_multilock_try(mb, 0, 5000), 0);
    cr_assert_eq(rh_server_resume(s[2]), 0);
    freeReplyObject(rh_command(s[2], "SCRIPT FLUSH"));

    cr_assert_eq(dlock_redlock_unlock(ra), 0, "%s", dlock_redlock_errmsg(ra));
    cr_assert(key_gone_within(s[2], "faults:flush:a", 1000),
              "the release sent without waiting never ran on the flushed server");

    dlock_redlock_free(ra);
    dlock_multilock_free(mb);
    for (int i = 0; i < 3; i++) {
        dlock_lock_free(a[i]);
        dlock_lock_free(b[i]);
        dlock_client_close(c[i]);
        rh_server_free(s[i]);
    }
}
