/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The semaphore scripts keep Redisson's data exactly: `<name>` a STRING
 * count of available permits; for the expirable kind, the ZSET of taken
 * permits (raw 16-byte ids scored by the epoch ms their lease ends, or
 * DLOCK__PERMIT_NO_LEASE); the new count published on redisson_sc:{name}
 * when permits come back (Redisson's SemaphorePubSub reads it as a number
 * and releases that many local waiters, so only a count > 0 is sent: a
 * negative one would break its listener). The replies are dlock's own.
 */
#include "single/scripts.h"
#include "single/semaphore_internal.h"

/* clang-format off: the Lua keeps its own layout */

/* A semaphore's scripts go on only for a count, a semaphore or nothing:
 * not for a latch dlock set, a lock or another program's key (scripts.h). */
#define SEM_KIND_CHECK \
	DLOCK__LUA_KIND \
	"do local kind = kind_of(KEYS[1]); " \
	"  if kind ~= 'none' and kind ~= 'count' and kind ~= 'semaphore' then " \
	"    return refuse(kind, 'a semaphore'); " \
	"  end; " \
	"end; "

/* A count made where none was: a latch mark left by Redisson's count down
 * to zero (it deletes only the key) must not make it a latch. */
#define STALE_LATCH_MARK "redis.call('del', latch_mark(KEYS[1])); "

/* Permits whose lease passed (ARGV index `now`, at most `limit` of them)
 * go back into the count; the new count is published. KEYS[1] the count,
 * `zset`/`chan` the KEYS indexes of the timeouts and the channel. */
#define RECLAIM(zset, chan, now, limit) \
	"local gone = redis.call('zrangebyscore', KEYS[" zset "], 0, ARGV[" now "], 'limit', 0, " limit "); " \
	"if #gone > 0 then " \
	"  redis.call('zrem', KEYS[" zset "], unpack(gone)); " \
	"  local n = redis.call('incrby', KEYS[1], #gone); " \
	"  if n > 0 then redis.call('publish', KEYS[" chan "], n); end; " \
	"end; "

/*
 * KEYS: count, receipt. ARGV: k, receipt ttl ms. Reply: permits left after
 * taking k, or -1 when fewer than k are available (or none is set).
 * A plain permit has no owner, so an attempt whose answer never comes
 * could not be undone blindly (it may not have run): when it takes the
 * permits it leaves a receipt (dlock's own key; Redisson never reads it),
 * which the undo queued behind it consumes. The client deletes a receipt
 * once the answer came.
 */
dlock__script dlock__script_sem_acquire = DLOCK__SCRIPT_HOLDS("semaphore-acquire",
		SEM_KIND_CHECK
		"local v = redis.call('get', KEYS[1]); "
		"if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then "
		"  local n = redis.call('decrby', KEYS[1], ARGV[1]); "
		"  redis.call('set', KEYS[2], ARGV[1], 'px', ARGV[2]); "
		"  return n; "
		"end; "
		"return -1;");

/* The undo of an abandoned plain attempt. KEYS: count, channel, receipt.
 * Reply: 1 the attempt had taken permits (given back), 0 it had not. */
dlock__script dlock__script_sem_undo = DLOCK__SCRIPT("semaphore-undo",
		"local k = redis.call('get', KEYS[3]); "
		"if k == false then return 0; end; "
		"redis.call('del', KEYS[3]); "
		"local n = redis.call('incrby', KEYS[1], k); "
		"if n > 0 then redis.call('publish', KEYS[2], n); end; "
		"return 1;");

/* KEYS: count, channel. ARGV: k. Reply: the count after. */
dlock__script dlock__script_sem_release = DLOCK__SCRIPT("semaphore-release",
		SEM_KIND_CHECK
		"local n = redis.call('incrby', KEYS[1], ARGV[1]); "
		"redis.call('publish', KEYS[2], n); "
		"return n;");

/* KEYS: count, channel. ARGV: n. Reply: 1 set, 0 a count was there. */
dlock__script dlock__script_sem_try_set = DLOCK__SCRIPT("semaphore-try-set",
		SEM_KIND_CHECK
		"if redis.call('get', KEYS[1]) ~= false then "
		"  return 0; "
		"end; "
		STALE_LATCH_MARK
		"redis.call('set', KEYS[1], ARGV[1]); "
		"if tonumber(ARGV[1]) > 0 then redis.call('publish', KEYS[2], ARGV[1]); end; "
		"return 1;");

/* KEYS: count, channel. ARGV: delta. Reply: the count after. */
dlock__script dlock__script_sem_add = DLOCK__SCRIPT("semaphore-add",
		SEM_KIND_CHECK
		"local v = redis.call('get', KEYS[1]); "
		"if v == false then " STALE_LATCH_MARK "end; "
		"local n = (v == false and 0 or tonumber(v)) + tonumber(ARGV[1]); "
		"redis.call('set', KEYS[1], n); "
		"if n > 0 and tonumber(ARGV[1]) > 0 then redis.call('publish', KEYS[2], n); end; "
		"return n;");

/* KEYS: count, channel[, timeouts]. ARGV: n. The total (available plus
 * taken: the ZSET's size, none for a plain semaphore) becomes n, as
 * Redisson's setPermits. Reply: the available count after. */
dlock__script dlock__script_sem_set = DLOCK__SCRIPT("semaphore-set",
		SEM_KIND_CHECK
		"local v = redis.call('get', KEYS[1]); "
		"if v == false then " STALE_LATCH_MARK "end; "
		"local taken = 0; "
		"if #KEYS > 2 then taken = redis.call('zcard', KEYS[3]); end; "
		"local n = tonumber(ARGV[1]) - taken; "
		"if v ~= false and tonumber(v) == n then return n; end; "
		"redis.call('set', KEYS[1], n); "
		"if n > 0 then redis.call('publish', KEYS[2], n); end; "
		"return n;");

/* KEYS: count, timeouts, channel. ARGV: now (epoch ms). Reply: available
 * permits after taking back the expired ones (0 when none is set). */
dlock__script dlock__script_sem_available = DLOCK__SCRIPT("semaphore-available",
		SEM_KIND_CHECK
		RECLAIM("2", "3", "1", "-1")
		"local v = redis.call('get', KEYS[1]); "
		"return v == false and 0 or tonumber(v);");

/*
 * Take one expirable permit. KEYS: count, timeouts, channel. ARGV: k (1),
 * lease end (epoch ms, or DLOCK__PERMIT_NO_LEASE), now, DLOCK__PERMIT_NO_LEASE,
 * then the permit ids. Expired permits come back first (at most k, as
 * Redisson does). Reply: {1} taken; otherwise how long until the earliest
 * lease ends (ms, >= 0), or -1 when no lease will end by itself. An id
 * already taken is this attempt run before (resent after its connection
 * dropped with the reply): {1} again, without taking a second permit.
 */
dlock__script dlock__script_permit_acquire = DLOCK__SCRIPT_HOLDS("permit-acquire",
		SEM_KIND_CHECK
		"if redis.call('zscore', KEYS[2], ARGV[5]) ~= false then return {1}; end; "
		RECLAIM("2", "3", "3", "ARGV[1]")
		"local v = redis.call('get', KEYS[1]); "
		"if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then "
		"  redis.call('decrby', KEYS[1], ARGV[1]); "
		"  for i = 5, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); end; "
		"  local ttl = redis.call('pttl', KEYS[1]); "
		"  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl); end; "
		"  return {1}; "
		"end; "
		"local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores'); "
		"if first[2] ~= nil and tonumber(first[2]) < tonumber(ARGV[4]) then "
		"  return math.max(0, tonumber(first[2]) - tonumber(ARGV[3])); "
		"end; "
		"return -1;");

/*
 * Give a permit back. KEYS: count, channel, timeouts. ARGV: id, now.
 * Reply: 1 given back; 2 given back, but its lease had passed (it was
 * still counted as taken); 0 no such permit.
 */
dlock__script dlock__script_permit_release = DLOCK__SCRIPT("permit-release",
		"local due = redis.call('zscore', KEYS[3], ARGV[1]); "
		"if due == false then return 0; end; "
		"redis.call('zrem', KEYS[3], ARGV[1]); "
		"local n = redis.call('incrby', KEYS[1], 1); "
		"redis.call('publish', KEYS[2], n); "
		"if tonumber(due) <= tonumber(ARGV[2]) then return 2; end; "
		"return 1;");

/*
 * Renew permits (Redisson's updateLeaseTime, many at once). KEYS: count,
 * timeouts, channel. ARGV: now, then pairs of id and new lease end, or ""
 * to check a permit with a fixed lease, which extends nothing. Expired
 * permits come back first. Reply: per id 1 renewed (or held), 0 gone.
 */
dlock__script dlock__script_permit_renew = DLOCK__SCRIPT("permit-renew",
		RECLAIM("2", "3", "1", "-1")
		"local out = {}; "
		"for i = 2, #ARGV, 2 do "
		"  if redis.call('zscore', KEYS[2], ARGV[i]) ~= false then "
		"    if ARGV[i + 1] ~= '' then redis.call('zadd', KEYS[2], ARGV[i + 1], ARGV[i]); end; "
		"    table.insert(out, 1); "
		"  else "
		"    table.insert(out, 0); "
		"  end; "
		"end; "
		"return out;");

/*
 * Every taken permit of an expirable semaphore goes back into the count
 * (dlock_semaphore_force_release), and the count is published as a
 * release does: waiters take them, and holders that listen there renew at
 * once and find theirs gone. KEYS: count, channel, timeouts. Reply: how
 * many were taken.
 */
dlock__script dlock__script_sem_force_release = DLOCK__SCRIPT("semaphore-force-release",
		SEM_KIND_CHECK
		"if redis.call('exists', KEYS[3]) == 0 then return 0; end; "
		DLOCK__LUA_SEM_TAKE_BACK("KEYS[1]", "KEYS[3]", "KEYS[2]")
		"return n;");

/*
 * Read what a semaphore has, changing nothing (dlock_semaphore_query).
 * KEYS: count[, timeouts]. ARGV: the channel. Reply: {count or nil,
 * {id, lease end, ...}, clients listening on the channel}.
 */
dlock__script dlock__script_sem_query = DLOCK__SCRIPT("semaphore-query",
		DLOCK__LUA_LISTENERS
		"local taken = {}; "
		"if #KEYS > 1 then taken = redis.call('zrange', KEYS[2], 0, -1, 'withscores'); end; "
		"return {redis.call('get', KEYS[1]), taken, listeners(ARGV[1])};");
