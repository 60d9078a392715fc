// SPDX-License-Identifier: BSD-3-Clause
package dlock.interop;

import java.util.concurrent.TimeUnit;

import org.redisson.api.RCountDownLatch;
import org.redisson.api.RedissonClient;

/**
 * The peer's RCountDownLatch commands (Peer.java hands them over), on the
 * first server or the cluster:
 *
 * <pre>
 *   latch set NAME COUNT     trySetCount          VALUE: true/false
 *   latch down NAME          countDown            VALUE: "-"
 *   latch count NAME         getCount             VALUE: the count
 *   latch await NAME WAIT    await(WAIT ms)       VALUE: true/false; WAIT -1: await(), "-"
 *   latch delete NAME        delete               VALUE: true/false
 * </pre>
 *
 * A new RCountDownLatch object per command, as cheap as Redisson makes it:
 * the latch has no client-side state but its shared subscription.
 */
final class Latches {
	private Latches() {
	}

	/* w: SEQ WORKER latch OP NAME [ARG] */
	static String execute(RedissonClient client, String[] w) throws Exception {
		if (w.length < 5)
			throw new IllegalArgumentException("latch OP NAME [ARG]");
		RCountDownLatch latch = client.getCountDownLatch(w[4]);
		switch (w[3]) {
		case "set":
			return String.valueOf(latch.trySetCount(Long.parseLong(w[5])));
		case "down":
			latch.countDown();
			return "-";
		case "count":
			return String.valueOf(latch.getCount());
		case "await": {
			long waitMs = Long.parseLong(w[5]);
			if (waitMs < 0) {
				latch.await();
				return "-";
			}
			return String.valueOf(latch.await(waitMs, TimeUnit.MILLISECONDS));
		}
		case "delete":
			return String.valueOf(latch.delete());
		default:
			throw new IllegalArgumentException("unknown latch command " + w[3]);
		}
	}
}
