// SPDX-License-Identifier: BSD-3-Clause
package bench;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * The contended case (bench/contend.js): this JVM is one of N processes on
 * one RLock on one server. It warms up on a lock of its own (--warmup pairs,
 * so the JIT is done before the clock runs), says "ready", waits for a line
 * on stdin, then loops --warm-s seconds unrecorded (the contended paths get
 * compiled too) and --duration seconds measured: lock(10 s) (Redisson waits
 * on the lock's pub/sub channel), hold --hold-us (spinning), unlock, sleep
 * --think-us. Then one line per hold, "h ACQUIRED UNLOCK_CALLED
 * UNLOCK_RETURNED", System.nanoTime = CLOCK_MONOTONIC ns.
 */
final class Contend {
	private final RedissonBench b;

	Contend(RedissonBench b) {
		this.b = b;
	}

	void run() throws Exception {
		RedissonClient c = RedissonBench.client(b.uris.get(0));
		String name = b.opt.get("name");
		if (name == null)
			throw new IllegalArgumentException("--name is required");
		RLock warm = c.getLock(name + ":warm:" + ProcessHandle.current().pid());
		for (long i = 0; i < b.num("warmup"); i++) {
			warm.lock(RedissonBench.LEASE_MS, TimeUnit.MILLISECONDS);
			warm.unlock();
		}
		RLock l = c.getLock(name);
		PrintStream out = System.out;
		out.println("ready");
		out.flush();
		if (new BufferedReader(new InputStreamReader(System.in)).readLine() == null)
			throw new IllegalStateException("no go line");
		loop(l, Double.parseDouble(b.opt.get("warm-s")));
		Run r = loop(l, Double.parseDouble(b.opt.get("duration")));
		long[] h = r.holds;
		StringBuilder sb = new StringBuilder();
		sb.append("window ").append(r.t0).append(' ').append(r.t1).append('\n');
		sb.append("cpu ").append(Math.round(r.cpuUs)).append("\nfailed 0\n");
		for (int i = 0; i < r.n; i += 3)
			sb.append("h ").append(h[i]).append(' ').append(h[i + 1]).append(' ').append(h[i + 2])
					.append('\n');
		sb.append("end\n");
		out.print(sb);
		out.flush();
		c.shutdown();
	}

	/** A loop's holds (acquired, unlock called, returned; n slots used). */
	private record Run(long[] holds, int n, long t0, long t1, double cpuUs) {
	}

	/** The worker's loop for secs seconds. */
	private Run loop(RLock l, double secs) {
		long hold = b.num("hold-us") * 1000, think = b.num("think-us") * 1000;
		long[] h = new long[3 << 20];
		int k = 0;
		double c0 = Measure.cpuUs();
		long t0 = Measure.monoNs(), end = t0 + (long) (secs * 1e9);
		while (Measure.monoNs() < end && k + 3 <= h.length) {
			l.lock(RedissonBench.LEASE_MS, TimeUnit.MILLISECONDS);
			long a = Measure.monoNs();
			Measure.spinUntil(a + hold);
			long u = Measure.monoNs();
			l.unlock();
			h[k++] = a;
			h[k++] = u;
			h[k++] = Measure.monoNs();
			if (think > 0)
				LockSupport.parkNanos(think);
		}
		return new Run(h, k, t0, Measure.monoNs(), Measure.cpuUs() - c0);
	}
}
