/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock --fenced`: every acquisition gets a fencing token that grows from
 * one holder to the next (Redisson's RFencedLock counter), given to the
 * command as DLOCK_TOKEN by `run` and printed alone by `acquire`.
 */
#include <criterion/criterion.h>

#include <stdlib.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"

TestSuite(cli_fenced, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* The number a command printed on its stdout. */
static long long printed(const proc *p)
{
	char *end;
	long long v = strtoll(p->out, &end, 10);

	cr_assert(end != p->out && *end == '\n', "`%s` printed \"%s\"", p->desc, p->out);
	return v;
}

Test(cli_fenced, each_holder_gets_a_larger_token)
{
	const char *uri = rh_server_uri(dl_srv);
	long long first, second, third;
	proc *p;

	p = DLOCK("-n", uri, "--timeout", TMO, "--fenced", "run", "orders", "--", "sh", "-c",
			"echo \"$DLOCK_TOKEN\"");
	ASSERT_STATUS(p, 0);
	first = printed(p);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "--fenced", "run", "orders", "--", "sh", "-c",
			"echo \"$DLOCK_TOKEN\"");
	ASSERT_STATUS(p, 0);
	second = printed(p);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "--fenced", "acquire", "-l", "5000", "--owner",
			"shell:1", "orders");
	ASSERT_STATUS(p, 0);
	third = printed(p);
	proc_free(p);
	cr_expect(first > 0 && second > first && third > second, "tokens %lld, %lld, %lld", first,
			second, third);
	cr_expect_eq(rh_command_int(dl_srv, "EVAL %s 1 %s",
			     "return tonumber(redis.call('get', KEYS[1]))",
			     "redisson_lock_token:{orders}"),
			third,
			"the counter is Redisson's, at the last token");
	p = DLOCK("-n", uri, "--timeout", TMO, "--fenced", "release", "--owner", "shell:1", "orders");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS orders"), 0);
}

Test(cli_fenced, a_plain_run_sees_no_token)
{
	proc *p = DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "orders", "--", "sh",
			"-c", "echo \"[${DLOCK_TOKEN-unset}]\"");

	ASSERT_STATUS(p, 0);
	cr_expect_str_eq(p->out, "[unset]\n");
	proc_free(p);
}
