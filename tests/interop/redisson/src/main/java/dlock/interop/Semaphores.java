// SPDX-License-Identifier: BSD-3-Clause
package dlock.interop;

import java.util.concurrent.TimeUnit;

import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * The semaphore commands of the peer (Peer.java hands every request to
 * {@link #execute} first). Redisson's RSemaphore ("sem-") and
 * RPermitExpirableSemaphore ("pes-"); LEASE -1 means no lease:
 *
 * <pre>
 *   sem-set NAME N            trySetPermits          VALUE: true/false
 *   sem-acquire NAME K        acquire(K)             VALUE: -
 *   sem-try NAME K WAIT       tryAcquire(K, WAIT ms) VALUE: true/false
 *   sem-release NAME K        release(K)             VALUE: -
 *   sem-avail NAME            availablePermits       VALUE: a count
 *   pes-set NAME N            trySetPermits          VALUE: true/false
 *   pes-acquire NAME LEASE    acquire([LEASE ms])    VALUE: the permit id
 *   pes-try NAME WAIT LEASE   tryAcquire(WAIT, LEASE ms)  VALUE: the id or null
 *   pes-release NAME ID       release(ID)            VALUE: -
 *   pes-tryrelease NAME ID    tryRelease(ID)         VALUE: true/false
 *   pes-avail NAME            availablePermits       VALUE: a count
 *   pes-lease NAME ID         getLeaseTime(ID)       VALUE: ms left (-1 no lease)
 * </pre>
 */
final class Semaphores {
	private Semaphores() {
	}

	/** The command's value, or null when w is no semaphore command. */
	static String execute(RedissonClient client, String[] w) throws Exception {
		String cmd = w[2];
		if (cmd.startsWith("sem-"))
			return plain(client.getSemaphore(w[3]), cmd, w);
		if (cmd.startsWith("pes-"))
			return expirable(client.getPermitExpirableSemaphore(w[3]), cmd, w);
		return null;
	}

	private static String plain(RSemaphore s, String cmd, String[] w) throws Exception {
		switch (cmd) {
		case "sem-set":
			return String.valueOf(s.trySetPermits(Integer.parseInt(w[4])));
		case "sem-acquire":
			s.acquire(Integer.parseInt(w[4]));
			return "-";
		case "sem-try":
			return String.valueOf(s.tryAcquire(Integer.parseInt(w[4]), Long.parseLong(w[5]), TimeUnit.MILLISECONDS));
		case "sem-release":
			s.release(Integer.parseInt(w[4]));
			return "-";
		case "sem-avail":
			return String.valueOf(s.availablePermits());
		default:
			throw new IllegalArgumentException("unknown command " + cmd);
		}
	}

	private static String expirable(RPermitExpirableSemaphore s, String cmd, String[] w) throws Exception {
		switch (cmd) {
		case "pes-set":
			return String.valueOf(s.trySetPermits(Integer.parseInt(w[4])));
		case "pes-acquire": {
			long lease = Long.parseLong(w[4]);
			return lease < 0 ? s.acquire() : s.acquire(lease, TimeUnit.MILLISECONDS);
		}
		case "pes-try":
			return String.valueOf(s.tryAcquire(Long.parseLong(w[4]), Long.parseLong(w[5]), TimeUnit.MILLISECONDS));
		case "pes-release":
			s.release(w[4]);
			return "-";
		case "pes-tryrelease":
			return String.valueOf(s.tryRelease(w[4]));
		case "pes-avail":
			return String.valueOf(s.availablePermits());
		case "pes-lease":
			return String.valueOf(s.getLeaseTime(w[4]));
		default:
			throw new IllegalArgumentException("unknown command " + cmd);
		}
	}
}
