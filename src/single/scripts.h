/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: the Lua scripts of the single-server lock (Redisson's data layout). */
#ifndef DLOCK_SINGLE_SCRIPTS_H
#define DLOCK_SINGLE_SCRIPTS_H

#include "core/net/script.h"

/*
 * Lua parts shared by the scripts of scripts.c and rwlock_scripts.c.
 *
 * The re-entry of an owner that has a field (c, a string) at `field` (Lua
 * expression): adopt a surplus the belief explains, else count one more
 * hold (and run `counted`, Lua statements, then). Leaves the count in c.
 * Why: see "Why the acquire is safe to retry" in scripts.c.
 */
#define ADOPT_OR_COUNT_AT(field, believed, trusted, counted) \
	"c = tonumber(c); " \
	"local b = tonumber(" believed "); " \
	"if b >= 0 and " trusted " == '1' and c > b + 1 then " \
	"  c = b + 1; " \
	"  redis.call('hset', KEYS[1], " field ", c); " \
	"elseif c ~= b + 1 then " counted "  c = redis.call('hincrby', KEYS[1], " field ", 1); " \
	"end; "

/* The same with the owner's field at ARGV[2] (the plain kinds). */
#define ADOPT_OR_COUNT(believed, trusted, counted) \
	ADOPT_OR_COUNT_AT("ARGV[2]", believed, trusted, counted)

/*
 * Why a release is safe to repeat, the acquire's way (no key of its own):
 * the caller passes the hold count it believes the owner has before this
 * release, and `repeat` "1" when this send repeats one whose answer was lost
 * (the connection dropped). If the server already shows one hold fewer (no
 * field at all for the last hold), the earlier send did run: answer as it
 * did - the holds left - and change nothing. A first send ("0") never
 * takes this way, so a hold found gone is still told apart (lost, or held
 * by others). A belief below 1 never matches: 0 (an owner of this client's
 * own that it has no record of: nothing to take twice) runs as a first
 * send; an unknown one (-1) is never repeated (dlock__release.retry_safe).
 */
#define RELEASE_REPEATED(field, believed, repeat) \
	"if " repeat " == '1' then " \
	"  local b = tonumber(" believed ") or -1; " \
	"  local was = tonumber(redis.call('hget', KEYS[1], " field ") or '0'); " \
	"  if b >= 1 and was == b - 1 then return b - 1; end; " \
	"end; "

/*
 * What a name holds, told by Redisson's layouts (docs/kinds.md has the rule
 * and the table of what every command does with every kind). kind_of(k):
 *   'none';
 *   'lock'      a hash whose every value is a hold count (RLock, fair, fenced);
 *   'rwlock'    the same with `mode` = read|write (RReadWriteLock);
 *   'hash'      any other hash: not a lock, nobody will ever release it;
 *   'semaphore' a count whose permits' ZSET {k}:timeout exists (an
 *               expirable semaphore with permits taken);
 *   'latch'     a count with dlock's latch mark dlock_latch:{k} (latch set);
 *   'count'     a count alone: a semaphore's, or a latch Redisson set (the
 *               data cannot tell them apart; both kinds' commands take it);
 *   'string'    a string that is not a whole number;
 *   else Redis's type: 'list', 'set', 'zset', 'stream'.
 * A big hash is judged by a sample of its fields (a lock's has a field per
 * holder: a big one is another program's).
 * refuse(kind, wanted): the error reply of a command meant for another
 * kind, before it wrote anything: "WRONGTYPE dlock: "<KEYS[1]>" is <kind>,
 * not <wanted>" (conn.c keeps the code and drops "dlock: ").
 */
#define DLOCK__LUA_KIND \
	"local function braced(k) " \
	"  if string.find(k, '{', 1, true) then return k; end; " \
	"  return '{' .. k .. '}'; " \
	"end; " \
	"local function latch_mark(k) return 'dlock_latch:' .. braced(k); end; " \
	"local function kind_of(k) " \
	"  local t = redis.call('type', k).ok; " \
	"  if t == 'hash' then " \
	"    local f; " \
	"    if redis.call('hlen', k) > 256 then f = redis.call('hscan', k, 0, 'count', 256)[2]; " \
	"    else f = redis.call('hgetall', k); end; " \
	"    local rw = false; " \
	"    for i = 1, #f, 2 do " \
	"      if f[i] == 'mode' and (f[i + 1] == 'read' or f[i + 1] == 'write') then rw = true; " \
	"      elseif not string.match(f[i + 1], '^%d+$') then return 'hash'; end; " \
	"    end; " \
	"    if rw then return 'rwlock'; end; " \
	"    return 'lock'; " \
	"  end; " \
	"  if t == 'string' then " \
	"    if not string.match(redis.call('get', k), '^%-?%d+$') then return 'string'; end; " \
	"    if redis.call('exists', braced(k) .. ':timeout') == 1 then return 'semaphore'; end; " \
	"    if redis.call('exists', latch_mark(k)) == 1 then return 'latch'; end; " \
	"    return 'count'; " \
	"  end; " \
	"  return t; " \
	"end; " \
	"local function refuse(kind, wanted) " \
	"  local kind_names = { lock = 'a lock (RLock, fair or fenced)', " \
	"  rwlock = 'a read-write lock (RReadWriteLock)', " \
	"  hash = 'a hash of another program (its values are not hold counts)', " \
	"  semaphore = 'a semaphore with permits taken (RPermitExpirableSemaphore)', " \
	"  latch = 'a count-down latch (RCountDownLatch)', " \
	"  count = 'a count (a semaphore or a count-down latch)', " \
	"  string = 'a string of another program (another lock library?)', " \
	"  list = 'a list of another program', set = 'a set of another program', " \
	"  zset = 'a sorted set of another program', stream = 'a stream of another program' }; " \
	"  return redis.error_reply('WRONGTYPE dlock: \"' .. KEYS[1] .. '\" is ' .. " \
	"    (kind_names[kind] or ('a ' .. kind .. ' of another program')) .. ', not ' .. wanted .. " \
	"    '; nothing was changed'); " \
	"end; "

/*
 * unlock --force of an expirable semaphore: every permit taken goes back
 * into the count `count`, its ZSET `zset` with them, and the new count is
 * published on `chan` as a release does, so waiters (Redisson's and
 * dlock's) take them and each holder, listening there, finds its permit
 * gone. The total stays what its users set. Leaves `n`, how many.
 */
#define DLOCK__LUA_SEM_TAKE_BACK(count, zset, chan) \
	"local n = redis.call('zcard', " zset "); " \
	"redis.call('del', " zset "); " \
	"local left = redis.call('incrby', " count ", n); " \
	"if left > 0 then redis.call('publish', " chan ", left); end; "

/* A lock's scripts go on only for a lock, a read-write lock or nothing.
 * LOCK_FIELD_CHECK: the same after `local c = redis.pcall('hget', ...)`,
 * judged only when that found no hold count (the common case costs nothing). */
#define LOCK_KIND_CHECK \
	"do local kind = kind_of(KEYS[1]); " \
	"  if kind ~= 'none' and kind ~= 'lock' and kind ~= 'rwlock' then return refuse(kind, 'a lock'); end; " \
	"end; "
#define LOCK_FIELD_CHECK \
	"if type(c) ~= 'string' or tonumber(c) == nil then " LOCK_KIND_CHECK "end; "

/*
 * Read-write lock helpers (Lua functions), for any script that needs them:
 * rw_base(name) is Redisson's suffixName base ("{name}", or the name when
 * it has a '{'), under which a read hold k of owner o keeps its timeout key
 * base:o:rwlock_timeout:k; readers_max(name) is the longest PTTL among the
 * timeout keys of every read hold the hash counts (-3 when none).
 */
#define RW_FUNCTIONS \
	"local function rw_base(k) " \
	"  if string.find(k, '{', 1, true) then return k; end; " \
	"  return '{' .. k .. '}'; " \
	"end; " \
	"local function readers_max(k) " \
	"  local m = -3; " \
	"  local base = rw_base(k); " \
	"  local f = redis.call('hgetall', k); " \
	"  for i = 1, #f, 2 do " \
	"    local n = tonumber(f[i + 1]); " \
	"    if n ~= nil and f[i] ~= 'mode' and string.sub(f[i], -6) ~= ':write' then " \
	"      for j = n, 1, -1 do " \
	"        m = math.max(m, redis.call('pttl', base .. ':' .. f[i] .. ':rwlock_timeout:' .. j)); " \
	"      end; " \
	"    end; " \
	"  end; " \
	"  return m; " \
	"end; "

/*
 * Lua: listeners(ch), how many clients of the node that runs the script
 * listen on channel ch, classic and (Redis 7+) sharded pub/sub - the node
 * that serves the script's key, where a cluster's waiters listen. Read
 * only: for status queries, and the acquire's count of waiting processes.
 */
#define DLOCK__LUA_LISTENERS \
	"local function listeners(ch) " \
	"  local n = redis.call('pubsub', 'numsub', ch)[2]; " \
	"  local s = redis.pcall('pubsub', 'shardnumsub', ch); " \
	"  if type(s) == 'table' and s.err == nil and s[2] ~= nil then n = n + s[2]; end; " \
	"  return n; " \
	"end; "

/*
 * Acquire. KEYS: name. ARGV: lease ms, owner, hold count the caller
 * believes the owner has (-1 = unknown).
 * Reply: {count} acquired (count = holds after this acquire), or an
 * integer PTTL when another owner holds the lock (-1: it has no expiry).
 */
extern dlock__script dlock__script_acquire;

/*
 * A waiter of a plain or fenced lock that joined its waiters (scripts.c)
 * and stops waiting without the lock leaves them. KEYS: the waiters' ZSET.
 * ARGV: the wake-up channels' prefix, how many watch, the owner. Reply: 1
 * left, 0 it was not there.
 */
extern dlock__script dlock__script_herd_leave;

/*
 * Release one hold. KEYS: name, channel, optionally the waiters' ZSET (a
 * plain or fenced lock: scripts.c). ARGV: message ("0"), lease ms for a
 * hold that remains (0: keep the TTL), owner, believed count, repeat; with
 * the waiters, their wake-up channels' prefix and how many watch.
 * Reply: nil not held by owner (-2: and others hold it); otherwise the
 * holds left (0 = released: key deleted, "0" published). A repeat gets the
 * first answer (RELEASE_REPEATED).
 */
extern dlock__script dlock__script_release;

/*
 * Force unlock of any kind of lock; a fair one (its queue exists) wakes the
 * head of its queue as Redisson's fair force unlock does. KEYS: name,
 * queue, deadlines, channel. ARGV: message, now (epoch ms).
 * Reply: 1 deleted, 0 none.
 */
extern dlock__script dlock__script_force_release;

/*
 * Watchdog renewal of many holds on one server. KEYS: names. ARGV: ttl ms,
 * then one owner per key, then one form per key (dlock__lock_form: "" by
 * the owner's field, "w" a write hold, "r" a read hold with its timeout
 * keys), after a "-" for a hold only to check (a fixed lease: nothing is
 * extended). Reply: array of 1 (renewed, or held) / 0 (hold gone) / -1 (the
 * key now holds a value that is not a lock).
 */
extern dlock__script dlock__script_renew;

/*
 * Undo one acquire whose outcome is unknown or unwanted (a quorum attempt
 * that failed, a reply that never came). KEYS: name, channel. ARGV: message
 * ("0"), owner, the hold count that acquire would have produced, lease ms
 * for a hold that remains (0: keep the TTL). Releases one hold only if the count is exactly
 * that, so an acquire that never ran takes nothing away.
 * Reply: -1 nothing done, else holds left (0 = released and published).
 */
extern dlock__script dlock__script_rollback;

/* Fenced acquire: also INCRs the token key. KEYS: name, token key. Reply {count, token} or PTTL. */
extern dlock__script dlock__script_acquire_fenced;

/* Raise a token counter to at least ARGV[1]. KEYS: token key. Reply: the counter after. */
extern dlock__script dlock__script_token_raise;

/*
 * Read-write lock (Redisson's RReadWriteLock), in rwlock_scripts.c. Their
 * keys and arguments are those of the plain scripts above (the owner is
 * the plain owner; the write field `<owner>:write` is made in Lua):
 * acquire_read/acquire_write as dlock__script_acquire (acquire_write
 * answers DLOCK__RW_UPGRADE for an owner that holds only the read half);
 * release_read/release_write as dlock__script_release (message "0"/"1");
 * rollback_read/rollback_write as dlock__script_rollback.
 */
extern dlock__script dlock__script_rw_acquire_read;
extern dlock__script dlock__script_rw_acquire_write;
extern dlock__script dlock__script_rw_release_read;
extern dlock__script dlock__script_rw_release_write;
extern dlock__script dlock__script_rw_rollback_read;
extern dlock__script dlock__script_rw_rollback_write;

/* The write acquire's answer to a read-to-write upgrade (never a PTTL). */
#define DLOCK__RW_UPGRADE (-3)

/*
 * Force unlock of one half: deletes the lock only in that half's mode, as
 * Redisson's. KEYS: name, channel. ARGV: mode ("read"/"write"), message.
 * Reply: 1 deleted, 0 not.
 */
extern dlock__script dlock__script_rw_force_release;

/* Redisson's isLocked() of a half. KEYS: name. ARGV: "r" or "w". Reply 1/0. */
extern dlock__script dlock__script_rw_locked;

/* Fair lock scripts (queue and deadlines as Redisson's RFairLock): see scripts.c. */
extern dlock__script dlock__script_fair_acquire;
extern dlock__script dlock__script_fair_leave;
extern dlock__script dlock__script_fair_undo;
extern dlock__script dlock__script_fair_release;

#endif
