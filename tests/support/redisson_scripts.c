/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Redisson's own Lua scripts, verbatim (reference/redisson-wire.md): the
 * compatibility oracle the wire tests run beside dlock. One copy.
 */
#include "support.h"

/* RLock acquire. KEYS = [name], ARGV = [leaseMs, lockName]; nil = acquired, else PTTL. */
const char dl_redisson_acquire[] = "if ((redis.call('exists', KEYS[1]) == 0) "
				   "or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
				   "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
				   "redis.call('pexpire', KEYS[1], ARGV[1]); "
				   "return nil; "
				   "end; "
				   "return redis.call('pttl', KEYS[1]);";

/* The Lua keeps its own layout: the shared piece on a line of its own. */
/* clang-format off */

/* Both unlocks release one hold of ARGV[3] in the same words: one copy, and
 * each script's text is still Redisson's, byte for byte. */
#define DL_REDISSON_RELEASE_ONE_HOLD \
	"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " \
	"return nil;" \
	"end; " \
	"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " \
	"if (counter > 0) then " \
	"redis.call('pexpire', KEYS[1], ARGV[2]); "

/* RLock unlock. KEYS = [name, channel, latch],
 * ARGV = [0, internalLockLeaseTime, lockName, publishCommand, latchTimeout]. */
const char dl_redisson_unlock[] = "local val = redis.call('get', KEYS[3]); "
				  "if val ~= false then "
				  "return tonumber(val);"
				  "end; "
				  DL_REDISSON_RELEASE_ONE_HOLD
				  "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); "
				  "return 0; "
				  "else "
				  "redis.call('del', KEYS[1]); "
				  "redis.call(ARGV[4], KEYS[2], ARGV[1]); "
				  "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); "
				  "return 1; "
				  "end; ";

/* RFencedLock acquire. KEYS = [name, tokenKey], ARGV = [leaseMs, lockName];
 * {-1, token} acquired, {pttl, -1} busy. */
const char dl_redisson_fenced_acquire[] = "if (redis.call('exists', KEYS[1]) == 0 "
					  "or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
					  "local token = redis.call('incr', KEYS[2]);"
					  "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
					  "redis.call('pexpire', KEYS[1], ARGV[1]); "
					  "return {-1, token}; "
					  "end; "
					  "return {redis.call('pttl', KEYS[1]), -1};";

/* RFairLock acquire (EVAL_LONG). KEYS = [name, queue, timeouts],
 * ARGV = [leaseMs, lockName, wait, nowMs]; nil = acquired, else the estimated wait. */
const char dl_redisson_fair_acquire[] =
		"while true do "
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);"
		"if firstThreadId2 == false then "
		"break;"
		"end;"
		"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);"
		"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "
		"redis.call('zrem', KEYS[3], firstThreadId2);"
		"redis.call('lpop', KEYS[2]);"
		"else "
		"break;"
		"end;"
		"end;"
		"if (redis.call('exists', KEYS[1]) == 0) "
		"and ((redis.call('exists', KEYS[2]) == 0) "
		"or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then "
		"redis.call('lpop', KEYS[2]);"
		"redis.call('zrem', KEYS[3], ARGV[2]);"
		"local keys = redis.call('zrange', KEYS[3], 0, -1);"
		"for i = 1, #keys, 1 do "
		"redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);"
		"end;"
		"redis.call('hset', KEYS[1], ARGV[2], 1);"
		"redis.call('pexpire', KEYS[1], ARGV[1]);"
		"return nil;"
		"end;"
		"if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
		"redis.call('hincrby', KEYS[1], ARGV[2],1);"
		"redis.call('pexpire', KEYS[1], ARGV[1]);"
		"return nil;"
		"end;"
		"local timeout = redis.call('zscore', KEYS[3], ARGV[2]);"
		"if timeout ~= false then "
		"local ttl = redis.call('pttl', KEYS[1]);"
		"return math.max(0, ttl); "
		"end;"
		"local lastThreadId = redis.call('lindex', KEYS[2], -1);"
		"local ttl;"
		"if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then "
		"ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);"
		"else "
		"ttl = redis.call('pttl', KEYS[1]);"
		"end;"
		"local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);"
		"if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then "
		"redis.call('rpush', KEYS[2], ARGV[2]);"
		"end;"
		"return ttl;";

/* RFairLock unlock. KEYS = [name, queue, timeouts, channel, latch],
 * ARGV = [0, internalLockLeaseTime, lockName, nowMs, publishCommand, latchTimeout]. */
const char dl_redisson_fair_unlock[] =
		"local val = redis.call('get', KEYS[5]); "
		"if val ~= false then "
		"return tonumber(val);"
		"end; "
		"while true do "
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);"
		"if firstThreadId2 == false then "
		"break;"
		"end; "
		"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);"
		"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "
		"redis.call('zrem', KEYS[3], firstThreadId2); "
		"redis.call('lpop', KEYS[2]); "
		"else "
		"break;"
		"end; "
		"end;"
		"if (redis.call('exists', KEYS[1]) == 0) then "
		"local nextThreadId = redis.call('lindex', KEYS[2], 0); "
		"if nextThreadId ~= false then "
		"redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); "
		"end; "
		"redis.call('set', KEYS[5], 1, 'px', ARGV[6]); "
		"return 1; "
		"end;"
		DL_REDISSON_RELEASE_ONE_HOLD
		"redis.call('set', KEYS[5], 0, 'px', ARGV[6]); "
		"return 0; "
		"end; "
		"redis.call('del', KEYS[1]); "
		"redis.call('set', KEYS[5], 1, 'px', ARGV[6]); "
		"local nextThreadId = redis.call('lindex', KEYS[2], 0); "
		"if nextThreadId ~= false then "
		"redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); "
		"end; "
		"return 1; ";
/* clang-format on */

/* RedissonReadLock / RedissonWriteLock forceUnlock. KEYS = [name, channel],
 * ARGV = [message, publishCommand]: the read half publishes 0 (UNLOCK_MESSAGE),
 * the write half 1 (READ_UNLOCK_MESSAGE). */
/* clang-format off */
const char dl_redisson_read_force_unlock[] =
		"if (redis.call('hget', KEYS[1], 'mode') == 'read') then "
		"redis.call('del', KEYS[1]); "
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); "
		"return 1; "
		"end; "
		"return 0; ";

const char dl_redisson_write_force_unlock[] =
		"if (redis.call('hget', KEYS[1], 'mode') == 'write') then "
		"redis.call('del', KEYS[1]); "
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); "
		"return 1; "
		"end; "
		"return 0; ";
/* clang-format on */
