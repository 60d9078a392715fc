/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scripts of a read-write lock, with Redisson's RReadWriteLock data:
 * the HASH <name> with `mode` = read|write; a writer's field
 * `<owner>:write` -> hold count; a reader's field `<owner>` -> hold count,
 * each read hold k with its STRING `{name}:<owner>:rwlock_timeout:<k>` and
 * its own TTL; the hash lives as long as the longest of them. A release
 * publishes on redisson_rwlock:{name}: "0" (wake one) when the last reader
 * leaves, "1" (wake all) and then "0" when a writer does.
 *
 * Keys and arguments are those of the plain scripts (scripts.h), so the C
 * side only picks the script. The owner's write field is made here.
 * The retry-safety of the acquire is the plain one (scripts.c): the caller's
 * believed count, adopted when the server shows exactly one more.
 */
#include "single/scripts.h"

/* clang-format off: the Lua keeps its own layout */

/*
 * A name whose key exists without a `mode` field is some other lock (an
 * RLock): held by others, never joined (Redisson's scripts would add a
 * mode to it and let both in).
 */
#define RW_FOREIGN_LOCK \
	"if mode == false and redis.call('exists', KEYS[1]) == 1 then " \
	"  return redis.call('pttl', KEYS[1]); " \
	"end; "

/*
 * Read acquire. Free, read mode, or write mode held by this owner (a writer
 * may read): one more read hold, with its own timeout key; the hash lives
 * at least as long. A surplus left by lost replies (a trusted belief, see
 * scripts.c) is dropped with its timeout keys.
 */
dlock__script dlock__script_rw_acquire_read = DLOCK__SCRIPT_HOLDS("rw-acquire-read",
		RW_FUNCTIONS
		DLOCK__LUA_KIND LOCK_KIND_CHECK
		"local mode = redis.call('hget', KEYS[1], 'mode'); "
		RW_FOREIGN_LOCK
		"if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then "
		"  return redis.call('pttl', KEYS[1]); "
		"end; "
		"if mode == false then redis.call('hset', KEYS[1], 'mode', 'read'); end; "
		"local tk = rw_base(KEYS[1]) .. ':' .. ARGV[2] .. ':rwlock_timeout:'; "
		"local c = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0'); "
		"local b = tonumber(ARGV[3]); "
		"if c > 0 and b >= 0 and ARGV[4] == '1' and c > b + 1 then "
		"  for j = c, b + 2, -1 do redis.call('del', tk .. j); end; "
		"  c = b + 1; "
		"  redis.call('hset', KEYS[1], ARGV[2], c); "
		"elseif c == 0 or c ~= b + 1 then "
		"  c = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
		"end; "
		"redis.call('set', tk .. c, 1, 'px', ARGV[1]); "
		"redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1]))); "
		"return {c};");

/*
 * Write acquire. Free: write mode, field 1. Re-entry: one more, and the
 * lease is added to the key's TTL (Redisson's). An owner that reads
 * without writing would wait for itself forever: DLOCK__RW_UPGRADE.
 */
dlock__script dlock__script_rw_acquire_write = DLOCK__SCRIPT_HOLDS("rw-acquire-write",
		DLOCK__LUA_KIND LOCK_KIND_CHECK
		"local mode = redis.call('hget', KEYS[1], 'mode'); "
		RW_FOREIGN_LOCK
		"local f = ARGV[2] .. ':write'; "
		"if mode == false then "
		"  redis.call('hset', KEYS[1], 'mode', 'write'); "
		"  redis.call('hset', KEYS[1], f, 1); "
		"  redis.call('pexpire', KEYS[1], ARGV[1]); "
		"  return {1}; "
		"end; "
		"if mode == 'write' then "
		"  local c = redis.call('hget', KEYS[1], f); "
		"  if c ~= false then "
		ADOPT_OR_COUNT_AT("f", "ARGV[3]", "ARGV[4]", "")
		"    redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[1])); "
		"    return {c}; "
		"  end; "
		"elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
		"  return -3; "
		"end; "
		"return redis.call('pttl', KEYS[1]);");

/*
 * One read hold of `owner` goes (its field exists; `mode` is the lock's):
 * its timeout key with it. The hash then lives as long as the longest read
 * hold left; with none left it goes and `msg` is published - unless a
 * writer (the same owner) still holds it: then its TTL is only ever
 * lengthened (Redisson's would cut the writer's lease to the readers').
 * Leaves the owner's holds left in c.
 */
#define READ_DROP_ONE(owner, msg) \
	"local c = redis.call('hincrby', KEYS[1], " owner ", -1); " \
	"if c <= 0 then c = 0; redis.call('hdel', KEYS[1], " owner "); end; " \
	"redis.call('del', rw_base(KEYS[1]) .. ':' .. " owner " .. ':rwlock_timeout:' .. (c + 1)); " \
	"local left = 0; " \
	"if redis.call('hlen', KEYS[1]) > 1 then " \
	"  left = readers_max(KEYS[1]); " \
	"  if mode == 'write' then " \
	"    local now = redis.call('pttl', KEYS[1]); " \
	"    if now >= 0 and left > now then redis.call('pexpire', KEYS[1], left); end; " \
	"    left = 1; " \
	"  elseif left > 0 then " \
	"    redis.call('pexpire', KEYS[1], left); " \
	"  end; " \
	"end; " \
	"if left <= 0 then " \
	"  redis.call('del', KEYS[1]); " \
	"  redis.call('publish', KEYS[2], " msg "); " \
	"end; "

/*
 * One write hold at field `f` goes (it exists; `mode` is write). The last:
 * the key goes, or, when the owner still reads, the lock turns to read
 * mode and lives as long as its read holds. Either way every waiter is
 * woken with `msg` ("1"): Redisson publishes only when the key goes, but
 * readers of others can enter in read mode too. A "0" follows: Redisson
 * frees on "1" only the threads already parked on its latch, so a reader
 * between its retry and its park would sleep the whole lease; "0" leaves it
 * a permit. Leaves the holds left in c.
 */
#define WRITE_DROP_ONE(f, lease, msg) \
	"local c = redis.call('hincrby', KEYS[1], " f ", -1); " \
	"if c > 0 then " \
	"  if tonumber(" lease ") > 0 then redis.call('pexpire', KEYS[1], " lease "); end; " \
	"else " \
	"  c = 0; " \
	"  redis.call('hdel', KEYS[1], " f "); " \
	"  if redis.call('hlen', KEYS[1]) <= 1 then " \
	"    redis.call('del', KEYS[1]); " \
	"  else " \
	"    redis.call('hset', KEYS[1], 'mode', 'read'); " \
	"    local m = readers_max(KEYS[1]); " \
	"    if m > 0 then redis.call('pexpire', KEYS[1], m); end; " \
	"  end; " \
	"  redis.call('publish', KEYS[2], " msg "); " \
	"  redis.call('publish', KEYS[2], '0'); " \
	"end; "

/* Safe to repeat as the plain release (RELEASE_REPEATED in scripts.h),
 * by the believed count of the half released. */
dlock__script dlock__script_rw_release_read = DLOCK__SCRIPT("rw-release-read",
		RW_FUNCTIONS
		DLOCK__LUA_KIND LOCK_KIND_CHECK
		RELEASE_REPEATED("ARGV[3]", "ARGV[4]", "ARGV[5]")
		"local mode = redis.call('hget', KEYS[1], 'mode'); "
		"if mode == false then return nil; end; "
		"if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return -2; end; " /* others' */
		READ_DROP_ONE("ARGV[3]", "ARGV[1]")
		"return c;");

dlock__script dlock__script_rw_release_write = DLOCK__SCRIPT("rw-release-write",
		RW_FUNCTIONS
		DLOCK__LUA_KIND LOCK_KIND_CHECK
		RELEASE_REPEATED("ARGV[3] .. ':write'", "ARGV[4]", "ARGV[5]")
		"local f = ARGV[3] .. ':write'; "
		"local mode = redis.call('hget', KEYS[1], 'mode'); "
		"if mode ~= 'write' or redis.call('hexists', KEYS[1], f) == 0 then "
		"  if mode ~= false then return -2; end; " /* others hold it */
		"  return nil; "
		"end; "
		WRITE_DROP_ONE("f", "ARGV[2]", "ARGV[1]")
		"return c;");

/* Take back one read hold only when the owner's count is exactly ARGV[3]. */
dlock__script dlock__script_rw_rollback_read = DLOCK__SCRIPT("rw-rollback-read",
		RW_FUNCTIONS
		"local mode = redis.call('hget', KEYS[1], 'mode'); "
		"local n = redis.call('hget', KEYS[1], ARGV[2]); "
		"if mode == false or n == false or tonumber(n) ~= tonumber(ARGV[3]) then "
		"  return -1; "
		"end; "
		READ_DROP_ONE("ARGV[2]", "ARGV[1]")
		"return c;");

/* Take back one write hold only when its count is exactly ARGV[3]. */
dlock__script dlock__script_rw_rollback_write = DLOCK__SCRIPT("rw-rollback-write",
		RW_FUNCTIONS
		"local f = ARGV[2] .. ':write'; "
		"local n = redis.call('hget', KEYS[1], f); "
		"if redis.call('hget', KEYS[1], 'mode') ~= 'write' or n == false "
		"    or tonumber(n) ~= tonumber(ARGV[3]) then "
		"  return -1; "
		"end; "
		WRITE_DROP_ONE("f", "ARGV[4]", "ARGV[1]")
		"return c;");

dlock__script dlock__script_rw_force_release = DLOCK__SCRIPT("rw-force-release",
		DLOCK__LUA_KIND LOCK_KIND_CHECK
		"if redis.call('hget', KEYS[1], 'mode') ~= ARGV[1] then return 0; end; "
		"redis.call('del', KEYS[1]); "
		"redis.call('publish', KEYS[2], ARGV[2]); "
		"if ARGV[2] == '1' then redis.call('publish', KEYS[2], '0'); end; "
		"return 1;");

dlock__script dlock__script_rw_locked = DLOCK__SCRIPT("rw-locked",
		"local mode = redis.call('hget', KEYS[1], 'mode'); "
		"if mode == 'read' then return ARGV[1] == 'r' and 1 or 0; end; "
		"if mode == 'write' then "
		"  if ARGV[1] == 'w' or redis.call('hlen', KEYS[1]) > 2 then return 1; end; "
		"end; "
		"return 0;");
/* clang-format on */
