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
 * The contended case (bench/contend.js): this JVM is one of the processes on
 * one RLock on one server, with --waiters M threads (default 1) sharing one
 * RedissonClient, as an application's threads would. It warms up on a lock
 * of its own (--warmup pairs, so the JIT is done before the clock runs), says
 * "ready", waits for a line on stdin ("go WARM_END END", CLOCK_MONOTONIC ns,
 * the same deadlines for all processes; a bare "go": now + --warm-s and +
 * --duration), then every thread loops unrecorded until WARM_END (the
 * contended paths get compiled too) and measured until END: lock(10 s) (Redisson waits on the lock's pub/sub
 * channel), hold --hold-us (spinning), unlock, sleep --think-us. Then
 * "window START END" (the latest thread's start, the earliest's end), "cpu
 * US" (the JVM's, all threads) and one line per hold, "h ACQUIRED
 * UNLOCK_CALLED UNLOCK_RETURNED THREAD", System.nanoTime = CLOCK_MONOTONIC ns.
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
		int m = Integer.parseInt(b.opt.getOrDefault("waiters", "1"));
		PrintStream out = System.out;
		out.println("ready");
		out.flush();
		BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
		String go = in.readLine();
		if (go == null)
			throw new IllegalStateException("no go line");
		if (b.opt.containsKey("crash")) {
			crash(c, name, m, in);
			return;
		}
		String[] g = go.trim().split(" ");
		long warmEnd, end;
		if (g.length == 3) { // "go WARM_END END": the same deadlines for all
			warmEnd = Long.parseLong(g[1]);
			end = Long.parseLong(g[2]);
		} else {
			warmEnd = Measure.monoNs() + (long) (Double.parseDouble(b.opt.get("warm-s")) * 1e9);
			end = warmEnd + (long) (Double.parseDouble(b.opt.get("duration")) * 1e9);
		}
		Run[] runs = new Run[m];
		Thread[] ts = new Thread[m];
		double[] c0 = { -1 };
		for (int k = 0; k < m; k++) {
			final int kk = k;
			ts[k] = new Thread(() -> runs[kk] = loop(c.getLock(name), warmEnd, end, c0));
			ts[k].start();
		}
		for (Thread t : ts)
			t.join();
		double cpu = Measure.cpuUs() - c0[0];
		long from = 0, to = Long.MAX_VALUE;
		for (Run r : runs) {
			if (r == null)
				throw new IllegalStateException("a waiter thread failed");
			from = Math.max(from, r.t0);
			to = Math.min(to, r.t1);
		}
		StringBuilder sb = new StringBuilder();
		sb.append("window ").append(from).append(' ').append(to).append('\n');
		sb.append("cpu ").append(Math.round(cpu)).append("\nfailed 0\n");
		for (int k = 0; k < m; k++) {
			long[] h = runs[k].holds;
			for (int i = 0; i < runs[k].n; i += 3)
				sb.append("h ").append(h[i]).append(' ').append(h[i + 1]).append(' ').append(h[i + 2])
						.append(' ').append(k).append('\n');
		}
		sb.append("end\n");
		out.print(sb);
		out.flush();
		c.shutdown();
	}

	/**
	 * The crash case (bench/crash.js): the holder takes the lock with a lease
	 * of --ttl-ms and waits to be killed; each of the m waiter threads calls
	 * lock once, prints "got T THREAD" and unlocks.
	 */
	private void crash(RedissonClient c, String name, int m, BufferedReader in) throws Exception {
		PrintStream out = System.out;
		if (b.opt.get("crash").equals("holder")) {
			c.getLock(name).lock(Long.parseLong(b.opt.getOrDefault("ttl-ms", "1000")),
					TimeUnit.MILLISECONDS);
			out.println("held " + Measure.monoNs());
			out.flush();
			in.readLine(); // until killed
			Thread.sleep(Long.MAX_VALUE);
		}
		long[] got = new long[m];
		Thread[] ts = new Thread[m];
		for (int k = 0; k < m; k++) {
			final int kk = k;
			ts[k] = new Thread(() -> {
				RLock l = c.getLock(name);
				l.lock(RedissonBench.LEASE_MS, TimeUnit.MILLISECONDS);
				got[kk] = Measure.monoNs();
				l.unlock();
			});
			ts[k].start();
		}
		StringBuilder sb = new StringBuilder();
		for (int k = 0; k < m; k++) {
			ts[k].join();
			if (got[k] == 0)
				throw new IllegalStateException("a waiter thread failed");
			sb.append("got ").append(got[k]).append(' ').append(k).append('\n');
		}
		out.print(sb.append("end\n"));
		out.flush();
		c.shutdown();
	}

	/** A loop's holds (acquired, unlock called, returned; n slots used). */
	private record Run(long[] holds, int n, long t0, long t1) {
	}

	/** One waiter's loop: unrecorded until warmEnd, recorded until end. */
	private Run loop(RLock l, long warmEnd, long end, double[] c0) {
		long hold = b.num("hold-us") * 1000, think = b.num("think-us") * 1000;
		long[] h = new long[3 << 16];
		int k = 0;
		long t0 = -1;
		for (;;) {
			long t = Measure.monoNs();
			if (t >= end)
				break;
			if (t0 < 0 && t >= warmEnd) {
				t0 = t;
				synchronized (c0) {
					if (c0[0] < 0)
						c0[0] = Measure.cpuUs();
				}
			}
			l.lock(RedissonBench.LEASE_MS, TimeUnit.MILLISECONDS);
			long a = Measure.monoNs();
			Measure.spinUntil(a + hold);
			long u = Measure.monoNs();
			l.unlock();
			long r = Measure.monoNs();
			if (t0 >= 0) {
				if (k + 3 > h.length)
					h = java.util.Arrays.copyOf(h, h.length * 2);
				h[k++] = a;
				h[k++] = u;
				h[k++] = r;
			}
			if (think > 0)
				LockSupport.parkNanos(think);
		}
		return new Run(h, k, t0 < 0 ? end : t0, Measure.monoNs());
	}
}
