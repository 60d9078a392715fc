/*
 * The scripts keep Redisson's data layout exactly: a HASH <name> with the
 * field <uuid>:<thread-id> -> hold count, PEXPIRE lease, "0" published on
 * redisson_lock__channel:{name} when the count reaches zero. Their replies
 * are dlock's own (only the data is shared with Java clients).
 */
#include "single/scripts.h"

/*
 * Why the acquire is safe to retry (Redisson issue 7367: a retried acquire
 * whose first reply was lost counts the hold twice, so the lock is never
 * released). The caller passes the hold count it believes it has. If the
 * server already shows exactly one more, the earlier attempt did apply:
 * adopt it (refresh the lease) instead of counting again. Every reply
 * carries the real count, so the client's belief is corrected each time.
 * With an unknown belief (-1) the comparison never matches and the script
 * behaves as Redisson's.
 */
dlock__script dlock__script_acquire = DLOCK__SCRIPT("acquire",
	"local c = redis.call('hget', KEYS[1], ARGV[2]); "
	"if c == false then "
	"  if redis.call('exists', KEYS[1]) == 1 then "
	"    return redis.call('pttl', KEYS[1]); "
	"  end; "
	"  redis.call('hset', KEYS[1], ARGV[2], 1); "
	"  redis.call('pexpire', KEYS[1], ARGV[1]); "
	"  return {1}; "
	"end; "
	"c = tonumber(c); "
	"if c ~= tonumber(ARGV[3]) + 1 then "
	"  c = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
	"end; "
	"redis.call('pexpire', KEYS[1], ARGV[1]); "
	"return {c};");

/* Redisson's unlock with its request-id latch: a release re-sent after a
 * lost reply finds the latch and returns the first answer. */
dlock__script dlock__script_release = DLOCK__SCRIPT("release",
	"local v = redis.call('get', KEYS[3]); "
	"if v ~= false then "
	"  return tonumber(v); "
	"end; "
	"if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then "
	"  return nil; "
	"end; "
	"local c = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
	"if c > 0 then "
	"  if tonumber(ARGV[2]) > 0 then "
	"    redis.call('pexpire', KEYS[1], ARGV[2]); "
	"  end; "
	"else "
	"  c = 0; "
	"  redis.call('del', KEYS[1]); "
	"  redis.call('publish', KEYS[2], ARGV[1]); "
	"end; "
	"redis.call('set', KEYS[3], c, 'px', ARGV[4]); "
	"return c;");

dlock__script dlock__script_force_release = DLOCK__SCRIPT("force-release",
	"if redis.call('del', KEYS[1]) == 1 then "
	"  redis.call('publish', KEYS[2], ARGV[1]); "
	"  return 1; "
	"end; "
	"return 0;");

dlock__script dlock__script_renew = DLOCK__SCRIPT("renew",
	"local r = {}; "
	"for i = 1, #KEYS do "
	"  if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then "
	"    redis.call('pexpire', KEYS[i], ARGV[1]); "
	"    r[i] = 1; "
	"  else "
	"    r[i] = 0; "
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
