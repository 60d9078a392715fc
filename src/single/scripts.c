/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The scripts keep Redisson's data layout exactly: a HASH <name> with the
 * field <uuid>:<thread-id> -> hold count, PEXPIRE lease, "0" published on
 * redisson_lock__channel:{name} when the count reaches zero. Their replies
 * are dlock's own (only the data is shared with Java clients).
 */
#include "single/scripts.h"

/* clang-format off: the Lua keeps its own layout */

/*
 * Why the acquire is safe to retry (Redisson issue 7367: a retried acquire
 * whose first reply was lost counts the hold twice, so the lock is never
 * released). The caller passes the hold count it believes it has. If the
 * server already shows exactly one more, the earlier attempt did apply:
 * adopt it (refresh the lease) instead of counting again. Every reply
 * carries the real count, so the client's belief is corrected each time.
 * With an unknown belief (-1) the comparison never matches and the script
 * behaves as Redisson's.
 *
 * ARGV[4] = "1" when the owner is the calling thread's own (this client's
 * uuid): only this client takes holds under it and the belief is exact, so
 * any surplus on the server is left over from acquires whose replies never
 * came - however many. It is dropped: the count becomes belief + 1. An
 * explicit owner ("0") may be shared with other processes, whose holds the
 * surplus may be: only an exact "one more" is adopted.
 */
/*
 * Waking without a herd (single/acquire_op.c): a waiting client passes
 * dlock's "taken" channel as ARGV[5]. Then a busy lock replies {0, pttl,
 * listeners of that channel, role} - how many processes watch - and a new
 * hold is told on that channel as "<lease>:<listeners>" when anyone listens
 * and ARGV[6] is "1" (a waiter's retry: a first attempt, mostly
 * uncontended, skips the count), so that the other watching processes stand
 * back instead of all asking the server. Redisson's data and its "0"
 * message are untouched. The channel is an argument, not a key: it hashes
 * to the lock's slot.
 *
 * Watchers and sleepers. Every "0" reaches every process that listens on
 * the lock's channel (a few us of the server's time each), so with many
 * waiting processes only the first DLOCK__HERD_WATCHERS of them listen. A
 * waiter's retry that also passes its wake-up channel's prefix (ARGV[7],
 * the channel being "<prefix>:<owner>", which it listens on first) and the
 * number of watchers (ARGV[8]) joins the ZSET of waiters (the last key,
 * dlock_lock__waiters:{name}, ordered by arrival) and learns its role: 1,
 * among the first ARGV[8], watch (listen on the lock's channel as ever);
 * 2 sleep (listen only on its own channel, with a timer at the holder's
 * TTL, a few seconds at most, as a fallback). A waiter that takes the lock leaves the set, and
 * whoever moves up into the watchers is told on its own channel ("1"); a
 * waiter whose wait ends without the lock leaves the same way
 * (dlock__script_herd_leave). A member nobody listens for (its process
 * died) must never keep a live waiter asleep: it is dropped when telling
 * it finds nobody, when a waiter that would sleep finds it among the
 * watchers (herd_role: then that waiter may watch in its place), and when
 * a release by a holder that came through the waiters (release.c) finds
 * it there (herd_wake: the next live ones are told to watch, and hear the
 * lock is free). Each looks at the first ARGV[8] members only: a few
 * PUBSUB NUMSUB, however many wait. A busy reply with a role counts the
 * watchers as ARGV[8] rather than asking the server.
 */
#define HERD_FUNCTIONS \
	"local function herd_refill(wz, pre, k, r) " \
	"  local guard = 0; " \
	"  while r > 0 and guard < 8 do " \
	"    guard = guard + 1; " \
	"    local m = redis.call('zrange', wz, k - r, k - 1); " \
	"    r = 0; " \
	"    for i = 1, #m do " \
	"      if redis.call('publish', pre .. ':' .. m[i], '1') == 0 then " \
	"        redis.call('zrem', wz, m[i]); r = r + 1; " \
	"      end; " \
	"    end; " \
	"  end; " \
	"end; " \
	"local function herd_prune(wz, pre, k) " \
	"  local r = 0; " \
	"  local m = redis.call('zrange', wz, 0, k - 1); " \
	"  for i = 1, #m do " \
	"    if listeners(pre .. ':' .. m[i]) == 0 then redis.call('zrem', wz, m[i]); r = r + 1; end; " \
	"  end; " \
	"  return r; " \
	"end; " \
	"local function herd_wake(wz, pre, k) " \
	"  herd_refill(wz, pre, k, herd_prune(wz, pre, k)); " \
	"end; " \
	"local function herd_role(pttl) " \
	"  if not ARGV[7] then return 0; end; " \
	"  local wz, pre, k = KEYS[#KEYS], ARGV[7], tonumber(ARGV[8]); " \
	"  local t = redis.call('time'); " \
	"  redis.call('zadd', wz, 'NX', t[1] * 1000000 + t[2], ARGV[2]); " \
	"  local keep = 60000; " \
	"  if pttl > 0 then keep = keep + 2 * pttl; end; " \
	"  redis.call('pexpire', wz, keep); " \
	"  local rank = redis.call('zrank', wz, ARGV[2]); " \
	"  if rank ~= false and rank >= k then " \
	"    herd_wake(wz, pre, k); " \
	"    rank = redis.call('zrank', wz, ARGV[2]); " \
	"  end; " \
	"  if rank == false or rank < k then return 1; end; " \
	"  return 2; " \
	"end; " \
	"local function herd_leave(wz, pre, k, me) " \
	"  local rank = redis.call('zrank', wz, me); " \
	"  if rank == false then return 0; end; " \
	"  redis.call('zrem', wz, me); " \
	"  if rank < k then herd_refill(wz, pre, k, 1); end; " \
	"  return 1; " \
	"end; "
#define HERD_BUSY \
	"if ARGV[5] then " \
	"  local pttl = redis.call('pttl', KEYS[1]); " \
	"  local role = herd_role(pttl); " \
	"  if role ~= 0 then return {0, pttl, tonumber(ARGV[8]), role}; end; " \
	"  return {0, pttl, listeners(ARGV[5]), 0}; " \
	"end; "
#define HERD_TAKEN \
	"if ARGV[7] then herd_leave(KEYS[#KEYS], ARGV[7], tonumber(ARGV[8]), ARGV[2]); end; " \
	"if ARGV[6] == '1' then " \
	"  local n = listeners(ARGV[5]); " \
	"  if n > 0 then redis.call('publish', ARGV[5], ARGV[1] .. ':' .. n); end; " \
	"end; "

dlock__script dlock__script_acquire = DLOCK__SCRIPT_HOLDS("acquire",
		DLOCK__LUA_LISTENERS DLOCK__LUA_KIND HERD_FUNCTIONS
		/* Free first (Redisson's order): the common case costs three calls. */
		"if redis.call('exists', KEYS[1]) == 0 then "
		"  redis.call('hset', KEYS[1], ARGV[2], 1); "
		"  redis.call('pexpire', KEYS[1], ARGV[1]); "
		HERD_TAKEN
		"  return {1}; "
		"end; "
		"local c = redis.pcall('hget', KEYS[1], ARGV[2]); "
		LOCK_FIELD_CHECK
		"if c == false then "
		HERD_BUSY
		"  return redis.call('pttl', KEYS[1]); "
		"end; " ADOPT_OR_COUNT("ARGV[3]", "ARGV[4]",
				"") "redis.call('pexpire', KEYS[1], ARGV[1]); "
				    "return {c};");

/* A waiter whose wait ended without the lock leaves the waiters (see above). */
dlock__script dlock__script_herd_leave = DLOCK__SCRIPT("herd-leave",
		DLOCK__LUA_LISTENERS HERD_FUNCTIONS
		"return herd_leave(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]);");

/* Redisson's unlock (its data and message), made safe to repeat by the
 * believed count instead of Redisson's request-id latch key: see
 * RELEASE_REPEATED in scripts.h. Given the waiters (KEYS[3]), a release
 * that frees the lock also drops the dead among their watchers, so that
 * live ones hear it (herd_wake, above). */
dlock__script dlock__script_release = DLOCK__SCRIPT("release",
		DLOCK__LUA_KIND DLOCK__LUA_LISTENERS HERD_FUNCTIONS
		"local c = redis.pcall('hget', KEYS[1], ARGV[3]); "
		/* Ours (the common case) is a lock: the kind is judged only without a hold. */
		LOCK_FIELD_CHECK
		RELEASE_REPEATED("ARGV[3]", "ARGV[4]", "ARGV[5]")
		/* Not ours: -2 when others hold it now (a brain split if we
		 * believed we held it: dlock/stats.h), else nil. */
		"if c == false then "
		"  if redis.call('exists', KEYS[1]) == 1 then return -2; end; "
		"  return nil; "
		"end; "
		/* The last hold (the common case) costs three calls. */
		"if tonumber(c) > 1 then "
		"  c = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
		"  if tonumber(ARGV[2]) > 0 then "
		"    redis.call('pexpire', KEYS[1], ARGV[2]); "
		"  end; "
		"  return c; "
		"end; "
		"redis.call('del', KEYS[1]); "
		"redis.call('publish', KEYS[2], ARGV[1]); "
		"if KEYS[3] then herd_wake(KEYS[3], ARGV[6], tonumber(ARGV[7])); end; "
		"return 0;");

dlock__script dlock__script_renew = DLOCK__SCRIPT("renew",
		RW_FUNCTIONS
		"local r = {}; "
		"local n = #KEYS; "
		"local ttl = tonumber(ARGV[1]); "
		"for i = 1, n do "
		/* Judged per lock: a key another program replaced by a value of
	 * another type (-1) must not fail the renewal of the others. */
		"  local t = redis.call('type', KEYS[i]).ok; "
		"  local form = ARGV[n + i + 1] or ''; "
		/* "-" first: a leased hold's check, which extends nothing. */
		"  local check = string.sub(form, 1, 1) == '-'; "
		"  if check then form = string.sub(form, 2); end; "
		"  local field = ARGV[i + 1]; "
		"  if form == 'w' then field = field .. ':write'; end; "
		"  local c = false; "
		"  if t == 'hash' then c = redis.call('hget', KEYS[i], field); end; "
		"  if t ~= 'hash' and t ~= 'none' then "
		"    r[i] = -1; "
		/* Gone (0), or held by others now (2: a brain split, dlock/stats.h). */
		"  elseif c == false then "
		"    if t == 'hash' then r[i] = 2; else r[i] = 0; end; "
		"  elseif check then "
		"    r[i] = 1; "
		"  elseif form == '' then "
		"    redis.call('pexpire', KEYS[i], ttl); "
		"    r[i] = 1; "
		"  else "
		/* A read hold: Redisson's ReadLockTask, every timeout key of the
	 * owner's holds, then the hash. The hash of a read-write lock must
	 * outlive every read hold it counts (and a writer's, in write mode),
	 * so it is only ever shortened to those. */
		"    if form == 'r' then "
		"      local base = rw_base(KEYS[i]) .. ':' .. field .. ':rwlock_timeout:'; "
		"      for j = tonumber(c), 1, -1 do "
		"        redis.call('pexpire', base .. j, ttl); "
		"      end; "
		"    end; "
		"    local keep = ttl; "
		"    local now = redis.call('pttl', KEYS[i]); "
		"    if now > ttl then "
		"      if form == 'r' and redis.call('hget', KEYS[i], 'mode') == 'write' then keep = now; "
		"      else keep = math.max(ttl, readers_max(KEYS[i])); end; "
		"    end; "
		"    redis.call('pexpire', KEYS[i], keep); "
		"    r[i] = 1; "
		"  end; "
		"end; "
		"return r;");

dlock__script dlock__script_rollback = DLOCK__SCRIPT("rollback",
		"local c = redis.call('hget', KEYS[1], ARGV[2]); "
		"if c == false or tonumber(c) ~= tonumber(ARGV[3]) then "
		"  return -1; "
		"end; "
		"if tonumber(c) > 1 then "
		"  redis.call('hincrby', KEYS[1], ARGV[2], -1); "
		"  if tonumber(ARGV[4]) > 0 then "
		"    redis.call('pexpire', KEYS[1], ARGV[4]); "
		"  end; "
		"  return tonumber(c) - 1; "
		"end; "
		"redis.call('del', KEYS[1]); "
		"redis.call('publish', KEYS[2], ARGV[1]); "
		"return 0;");

/* The fenced acquire (Redisson's RFencedLock): every acquisition, re-entry
 * included, INCRs redisson_lock_token:{name}. KEYS: name, token key. ARGV as
 * the plain acquire. Reply {count, token} or the holder's PTTL. */
dlock__script dlock__script_acquire_fenced = DLOCK__SCRIPT_HOLDS("acquire-fenced",
		/* The counter is read or incremented before the lock is touched: a
	 * counter that is not a number fails the script with nothing written. */
		DLOCK__LUA_LISTENERS DLOCK__LUA_KIND HERD_FUNCTIONS
		"if redis.call('exists', KEYS[1]) == 0 then "
		"  local t = redis.call('incr', KEYS[2]); "
		"  redis.call('hset', KEYS[1], ARGV[2], 1); "
		"  redis.call('pexpire', KEYS[1], ARGV[1]); "
		HERD_TAKEN
		"  return {1, t}; "
		"end; "
		"local c = redis.pcall('hget', KEYS[1], ARGV[2]); "
		LOCK_FIELD_CHECK
		"if c == false then "
		HERD_BUSY
		"  return redis.call('pttl', KEYS[1]); "
		"end; "
		"local t = tonumber(redis.call('get', KEYS[2]) or '0'); " ADOPT_OR_COUNT("ARGV[3]",
				"ARGV[4]",
				"  t = redis.call('incr', KEYS[2]); ") "redis.call('pexpire', KEYS[1], ARGV[1]); "
								       "return {c, t};");

/* Raise a token counter to at least ARGV[1] (a fenced RedLock writes its
 * quorum's maximum back). KEYS: token key. Reply: the counter after. */
dlock__script dlock__script_token_raise = DLOCK__SCRIPT("token-raise",
		"local v = tonumber(redis.call('get', KEYS[1]) or '0'); "
		"if v < tonumber(ARGV[1]) then "
		"  redis.call('set', KEYS[1], ARGV[1]); "
		"  return tonumber(ARGV[1]); "
		"end; "
		"return v;");

/*
 * Fair lock (Redisson's RFairLock): waiters queue in the LIST
 * redisson_lock_queue:{name}, each with a deadline in the ZSET
 * redisson_lock_timeout:{name} (client wall-clock ms: the one place dlock
 * uses the wall clock, because Redisson's data does). The part every fair
 * script starts with: drop waiters at the head whose place has expired.
 * KEYS[2] = queue, KEYS[3] = deadlines; `now` is the named ARGV.
 */
#define FAIR_DROP_EXPIRED(now) \
	"while true do " \
	"  local head = redis.call('lindex', KEYS[2], 0); " \
	"  if head == false then break; end; " \
	"  local t = redis.call('zscore', KEYS[3], head); " \
	"  if t ~= false and tonumber(t) <= tonumber(" now ") then " \
	"    redis.call('zrem', KEYS[3], head); " \
	"    redis.call('lpop', KEYS[2]); " \
	"  else break; end; " \
	"end; "

/*
 * A dead waiter at the head of a free fair lock's queue would keep every
 * live one behind it out for its whole place time (Redisson's default is
 * 5 minutes). Every fair waiter, Redisson's and dlock's, listens on its own
 * channel, "<lock's channel>:<owner>", while it waits; one found with no
 * listener is noted in dlock's hash `dlock_lock__gone:{name}` (owner ->
 * server ms first seen so), and dropped once it has stayed so for
 * FAIR_DEAD_GRACE_MS - a live waiter subscribes a moment after it queues,
 * so a newcomer is not taken for dead. Up to 8 silent waiters behind the
 * head are noted in the same pass, so that a row of dead ones goes at once.
 * Redisson neither reads nor writes the hash. Needs DLOCK__LUA_KIND's
 * braced() and DLOCK__LUA_LISTENERS.
 */
#define FAIR_DEAD_GRACE_MS "1000"
#define FAIR_DROP_DEAD \
	"if redis.call('exists', KEYS[1]) == 0 and redis.call('exists', KEYS[2]) == 1 then " \
	"  local gone = 'dlock_lock__gone:' .. braced(KEYS[1]); " \
	"  local chan = 'redisson_lock__channel:' .. braced(KEYS[1]) .. ':'; " \
	"  local t = redis.call('time'); " \
	"  local now = t[1] * 1000 + math.floor(t[2] / 1000); " \
	"  local q = redis.call('lrange', KEYS[2], 0, 7); " \
	"  local dropping = true; " \
	"  for i = 1, #q do " \
	"    if q[i] == ARGV[2] or listeners(chan .. q[i]) > 0 then " \
	"      redis.call('hdel', gone, q[i]); " \
	"      dropping = false; " \
	"    else " \
	"      local seen = tonumber(redis.call('hget', gone, q[i])); " \
	"      if seen == nil then " \
	"        redis.call('hset', gone, q[i], now); " \
	"        dropping = false; " \
	"      elseif dropping and now - seen >= " FAIR_DEAD_GRACE_MS " then " \
	"        redis.call('lrem', KEYS[2], 1, q[i]); " \
	"        redis.call('zrem', KEYS[3], q[i]); " \
	"        redis.call('hdel', gone, q[i]); " \
	"      else " \
	"        dropping = false; " \
	"      end; " \
	"    end; " \
	"  end; " \
	"  if redis.call('exists', gone) == 1 then redis.call('pexpire', gone, 60000); end; " \
	"end; "

/*
 * dlock's own mark of a fair wait that has left its queue while an attempt
 * of it was unanswered (single/acquire.c: dlock__fair_exit_prepare): a
 * string key `dlock_lock__left:{name}:<wait id>`, in the lock's slot, that
 * expires by itself. Redisson neither reads nor writes it. The leave and
 * the undo set it when given the key (and its lifetime, ms); an attempt
 * that names it and finds it ran after its waiter left: it answers as a
 * busy lock does and changes nothing.
 */
#define FAIR_MARK_LEFT(key, ttl) \
	"if " key " ~= nil then redis.call('set', " key ", '1', 'px', " ttl "); end; "
#define FAIR_LEFT_ALREADY \
	"if KEYS[4] ~= nil and redis.call('exists', KEYS[4]) == 1 then " \
	"  local pttl = redis.call('pttl', KEYS[1]); " \
	"  if pttl == -2 then pttl = -1000 - redis.call('llen', KEYS[2]); end; " \
	"  return pttl; " \
	"end; "

/*
 * Fair acquire. KEYS: name, queue, deadlines, and optionally the wait's
 * mark (FAIR_MARK_LEFT). ARGV: lease, owner, believed
 * count (as the plain acquire), the waiter's wait ms, now (epoch ms),
 * enqueue (1: join the queue when it cannot have the lock; 0: one attempt),
 * the plain acquire's ARGV[4] (the owner is the calling thread's).
 * ARGV order is dlock's own, the same for both variants (Redisson swaps the
 * last two between its variants; only the data must match).
 * Reply: {count} acquired; or an integer: the lock's PTTL (-1 when it has
 * no expiry), or, when nobody holds it but others are queued ahead,
 * -1000 - the queue's length.
 */
dlock__script dlock__script_fair_acquire = DLOCK__SCRIPT_HOLDS("fair-acquire",
		DLOCK__LUA_KIND DLOCK__LUA_LISTENERS LOCK_KIND_CHECK FAIR_LEFT_ALREADY FAIR_DROP_EXPIRED(
				"ARGV[5]") FAIR_DROP_DEAD "if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0 "
					   "    or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then "
					   "  redis.call('lpop', KEYS[2]); "
					   "  redis.call('zrem', KEYS[3], ARGV[2]); "
					   "  local ks = redis.call('zrange', KEYS[3], 0, -1); "
					   "  for i = 1, #ks do "
					   "    redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), ks[i]); "
					   "  end; "
					   "  redis.call('hset', KEYS[1], ARGV[2], 1); "
					   "  redis.call('pexpire', KEYS[1], ARGV[1]); "
					   "  return {1}; "
					   "end; "
					   "local c = redis.call('hget', KEYS[1], ARGV[2]); "
					   "if c ~= false then " ADOPT_OR_COUNT("ARGV[3]",
							   "ARGV[7]",
							   "") "  redis.call('pexpire', KEYS[1], ARGV[1]); "
							       "  return {c}; "
							       "end; "
							       "local pttl = redis.call('pttl', KEYS[1]); "
							       "if pttl == -2 then pttl = -1000 - redis.call('llen', KEYS[2]); end; "
							       "if ARGV[6] == '0' or redis.call('zscore', KEYS[3], ARGV[2]) ~= false then "
							       "  return pttl; "
							       "end; "
							       "local last = redis.call('lindex', KEYS[2], -1); "
							       "local ttl; "
							       "if last ~= false and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) ~= false then "
							       "  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[5]); "
							       "else "
							       "  ttl = redis.call('pttl', KEYS[1]); "
							       "end; "
							       "if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[4]) + tonumber(ARGV[5]), ARGV[2]) == 1 then "
							       "  redis.call('rpush', KEYS[2], ARGV[2]); "
							       "end; "
							       "return pttl;");

#define FAIR_LEAVE(queue, deadlines, owner, wait) \
	"local q = redis.call('lrange', " queue ", 0, -1); " \
	"local i = 1; " \
	"while i <= #q and q[i] ~= " owner " do i = i + 1; end; " \
	"i = i + 1; " \
	"while i <= #q do " \
	"  redis.call('zincrby', " deadlines ", -tonumber(" wait "), q[i]); " \
	"  i = i + 1; " \
	"end; " \
	"redis.call('zrem', " deadlines ", " owner "); " \
	"redis.call('lrem', " queue ", 0, " owner "); "

/*
 * Undo a fair acquire whose reply never came: it may have taken the lock
 * (count ARGV[3], as the rollback) or joined the queue. KEYS: name, queue,
 * deadlines, channel prefix, optionally the wait's mark. ARGV: message,
 * owner, count, lease ms (0: keep the TTL), wait ms, the mark's lifetime
 * (ms). A released lock wakes the head of the queue.
 */
dlock__script dlock__script_fair_undo = DLOCK__SCRIPT("fair-undo",
		FAIR_MARK_LEFT("KEYS[5]", "ARGV[6]")
		"local c = redis.call('hget', KEYS[1], ARGV[2]); "
		"if c ~= false and tonumber(c) == tonumber(ARGV[3]) then "
		"  if tonumber(c) > 1 then "
		"    redis.call('hincrby', KEYS[1], ARGV[2], -1); "
		"    if tonumber(ARGV[4]) > 0 then redis.call('pexpire', KEYS[1], ARGV[4]); end; "
		"  else "
		"    redis.call('del', KEYS[1]); "
		"    local head = redis.call('lindex', KEYS[2], 0); "
		"    if head ~= false then redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1]); end; "
		"  end; "
		"end; " FAIR_LEAVE("KEYS[2]", "KEYS[3]", "ARGV[2]", "ARGV[5]") "return 1;");

/* A waiter gives up: those behind it move up by its wait, and it leaves.
 * KEYS: queue, deadlines, optionally the wait's mark. ARGV: owner, wait
 * ms, the mark's lifetime (ms). */
dlock__script dlock__script_fair_leave = DLOCK__SCRIPT("fair-leave",
		FAIR_MARK_LEFT("KEYS[3]", "ARGV[3]")
		FAIR_LEAVE("KEYS[1]", "KEYS[2]", "ARGV[1]", "ARGV[2]") "return 1;");

/*
 * Fair release. KEYS: name, queue, deadlines, channel prefix
 * (redisson_lock__channel:{name}). ARGV: message, lease ms for a hold that
 * remains (0: keep the TTL), owner, now, believed count, repeat (as the
 * plain release: RELEASE_REPEATED).
 * Wakes only the head of the queue, on its own channel. As Redisson's, a
 * release of a lock that no longer exists wakes the head; unlike its
 * success, the reply says the owner did not hold it (as every other kind's).
 * Reply: nil not held by owner (-2: others hold it); otherwise the holds left.
 */
dlock__script dlock__script_fair_release = DLOCK__SCRIPT("fair-release",
		DLOCK__LUA_KIND LOCK_KIND_CHECK
		RELEASE_REPEATED("ARGV[3]", "ARGV[5]", "ARGV[6]")
		FAIR_DROP_EXPIRED("ARGV[4]")
		"local function wake_head() "
		"  local nxt = redis.call('lindex', KEYS[2], 0); "
		"  if nxt ~= false then redis.call('publish', KEYS[4] .. ':' .. nxt, ARGV[1]); end; "
		"end; "
		"if redis.call('exists', KEYS[1]) == 1 then "
		"  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return -2; end; "
		"  local c = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
		"  if c > 0 then "
		"    if tonumber(ARGV[2]) > 0 then redis.call('pexpire', KEYS[1], ARGV[2]); end; "
		"    return c; "
		"  end; "
		"  redis.call('del', KEYS[1]); "
		"  wake_head(); "
		"  return 0; "
		"end; "
		"wake_head(); "
		"return nil;");

/*
 * Force unlock, for any handle: the lock is fair when its queue exists
 * (whatever kind of handle asks: the command line has no way to know), and
 * then it does what Redisson's RedissonFairLock.forceUnlock does - drop the
 * expired heads, delete, wake the head on its own channel - and, beyond
 * Redisson, also publishes on the lock's own channel, where no fair waiter
 * listens: a holder that watches for force unlocks (watch_force_unlock)
 * hears it. A read-write lock (a `mode` field) is deleted as the force
 * unlock of its half in that mode does in Redisson, with its message on
 * redisson_rwlock:{name}: "0" in read mode, "1" in write mode (and a "0"
 * after it, as dlock's write release: rwlock_scripts.c), so its holders
 * and waiters, Redisson's and dlock's, hear it. Otherwise it is Redisson's
 * plain forceUnlock: delete and publish on the lock's channel.
 * An expirable semaphore with permits taken gets them all back
 * (DLOCK__LUA_SEM_TAKE_BACK); a count alone has nothing to take back; any
 * other kind is refused (docs/kinds.md).
 * KEYS: name, queue, deadlines, channel, read-write channel. ARGV: message,
 * now (epoch ms). Reply: 1 deleted, 2 permits taken back, 0 none.
 */
dlock__script dlock__script_force_release = DLOCK__SCRIPT("force-release",
		DLOCK__LUA_KIND
		"local kind = kind_of(KEYS[1]); "
		"if kind == 'semaphore' then "
		DLOCK__LUA_SEM_TAKE_BACK("KEYS[1]", "braced(KEYS[1]) .. ':timeout'",
				"'redisson_sc:' .. braced(KEYS[1])")
		"  return 2; "
		"end; "
		"if kind == 'count' then return 0; end; "
		"if kind ~= 'none' and kind ~= 'lock' and kind ~= 'rwlock' then "
		"  return refuse(kind, 'a lock or a semaphore'); "
		"end; "
		"local mode = redis.call('hget', KEYS[1], 'mode'); "
		"if mode == 'read' or mode == 'write' then "
		"  redis.call('del', KEYS[1]); "
		"  if mode == 'write' then redis.call('publish', KEYS[5], '1'); end; "
		"  redis.call('publish', KEYS[5], '0'); "
		"  return 1; "
		"end; "
		"if redis.call('exists', KEYS[2]) == 1 then "
		FAIR_DROP_EXPIRED("ARGV[2]")
		"  if redis.call('del', KEYS[1]) == 0 then return 0; end; "
		"  local nxt = redis.call('lindex', KEYS[2], 0); "
		"  if nxt ~= false then redis.call('publish', KEYS[4] .. ':' .. nxt, ARGV[1]); end; "
		"  redis.call('publish', KEYS[4], ARGV[1]); "
		"  return 1; "
		"end; "
		"if redis.call('del', KEYS[1]) == 0 then return 0; end; "
		"redis.call('publish', KEYS[4], ARGV[1]); "
		"return 1;");
/* clang-format on */
