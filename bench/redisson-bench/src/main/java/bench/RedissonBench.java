// SPDX-License-Identifier: BSD-3-Clause
package bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.RedissonRedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * redisson-bench - the Redisson peer of dlock-bench (SPEC §9), measured the
 * same way: per lock+unlock pair, System.nanoTime (CLOCK_MONOTONIC) latencies,
 * nearest-rank p50/p99 in µs, this JVM's CPU per pair, the servers' INFO cpu
 * per pair. One RedissonClient per server (single-server config, Redisson's
 * defaults throughout), as RedissonRedLock requires.
 *
 *   1  uncontended, after a JVM warm-up of --jvm-warmup pairs per row:
 *      RLock lock(10 s)/unlock on 1 server, the same without a lease (the
 *      watchdog), and RedissonRedLock lock(10 s)/unlock over 3 and 5 servers.
 *
 * With --contend-worker it is one process of the contended case (Contend), or
 * with --crash-holder or --crash-waiter as well, of the crash case.
 *
 * usage: java -jar redisson-bench.jar --uris redis://127.0.0.1:P1,... [--iterations N]
 *          [--warmup N] [--jvm-warmup N] [--json] [--samples]
 */
public final class RedissonBench {
	static final long LEASE_MS = 10000;

	interface Pair {
		/** One lock+unlock; returns the time the lock call returned. */
		long run() throws Exception;
	}

	final Map<String, String> opt = new LinkedHashMap<>(Map.of("iterations", "20000",
			"warmup", "2000", "jvm-warmup", "10000", "duration", "10", "warm-s", "3",
			"hold-us", "100", "think-us", "1000"));
	final List<String> uris = new ArrayList<>();
	boolean json, samples;

	public static void main(String[] args) throws Exception {
		System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
		System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
		RedissonBench b = new RedissonBench();
		boolean worker = b.parse(args);
		if (uriCheck(b.uris))
			throw new IllegalArgumentException("--uris (or --uri) is required");
		if (worker)
			new Contend(b).run();
		else
			b.scenario1();
		System.exit(0); // Redisson's non-daemon threads would keep the JVM up
	}

	private static boolean uriCheck(List<String> uris) {
		uris.forEach(Measure::portOf);
		return uris.isEmpty();
	}

	/** Parses args; true for --contend-worker. */
	boolean parse(String[] a) {
		boolean worker = false;
		for (int i = 0; i < a.length; i++) {
			String k = a[i];
			switch (k) {
			case "--json" -> json = true;
			case "--samples" -> samples = true;
			case "--contend-worker" -> worker = true;
			case "--crash-holder" -> opt.put("crash", "holder");
			case "--crash-waiter" -> opt.put("crash", "waiter");
			case "--uris", "--uri" -> {
				for (String u : a[++i].split("[ ,]+"))
					if (!u.isEmpty())
						uris.add(u);
			}
			case "--scenario" -> {
				if (!a[++i].equals("1"))
					throw new IllegalArgumentException("only scenario 1");
			}
			default -> {
				if (!k.startsWith("--") || i + 1 >= a.length)
					throw new IllegalArgumentException("unknown argument " + k);
				opt.put(k.substring(2), a[++i]);
			}
			}
		}
		return worker;
	}

	long num(String k) {
		return Long.parseLong(opt.get(k));
	}

	void say(String s) {
		(json ? System.err : System.out).println(s);
	}

	/** A client of its own for one server: Redisson's single-server defaults. */
	static RedissonClient client(String uri) {
		Config cfg = new Config();
		cfg.useSingleServer().setAddress("redis://127.0.0.1:" + Measure.portOf(uri));
		return Redisson.create(cfg);
	}

	static String redissonVersion() {
		try (var in = Redisson.class.getResourceAsStream(
				"/META-INF/maven/org.redisson/redisson/pom.properties")) {
			Properties p = new Properties();
			p.load(in);
			return p.getProperty("version");
		} catch (Exception e) {
			return "?";
		}
	}

	void scenario1() throws Exception {
		String run = Long.toHexString(System.nanoTime() ^ ProcessHandle.current().pid() << 20);
		long iters = num("iterations"), warm = num("jvm-warmup");
		say("redisson-bench: redisson " + redissonVersion() + ", java "
				+ System.getProperty("java.version") + ", run " + run);
		say("scenario 1: Redisson uncontended lock+unlock, " + iters + " iterations, " + warm
				+ " warm-up per row");
		List<RedissonClient> clients = new ArrayList<>();
		for (String u : uris.subList(0, Math.min(5, uris.size())))
			clients.add(client(u));
		List<Map<String, Object>> rows = new ArrayList<>();
		for (int n : new int[] { 1, 3, 5 }) {
			if (n > clients.size()) {
				say("  skipped: " + n + " servers (only " + clients.size() + ")");
				continue;
			}
			String name = "redisson-bench:" + run + ":s1-n" + n;
			if (n == 1) {
				RLock l = clients.get(0).getLock(name);
				rows.add(measure(n, "lock+unlock", "RLock lock(10 s)", warm, iters, () -> {
					l.lock(LEASE_MS, TimeUnit.MILLISECONDS);
					long t = Measure.monoNs();
					l.unlock();
					return t;
				}));
				RLock w = clients.get(0).getLock(name + "-watchdog");
				rows.add(measure(n, "lock+unlock watchdog", "RLock lock(), watchdog", warm, iters,
						() -> {
							w.lock();
							long t = Measure.monoNs();
							w.unlock();
							return t;
						}));
				continue;
			}
			RLock[] locks = new RLock[n];
			for (int i = 0; i < n; i++)
				locks[i] = clients.get(i).getLock(name);
			RedissonRedLock red = new RedissonRedLock(locks);
			rows.add(measure(n, "lock+unlock", "RedissonRedLock lock(10 s)", warm, iters, () -> {
				red.lock(LEASE_MS, TimeUnit.MILLISECONDS);
				long t = Measure.monoNs();
				red.unlock();
				return t;
			}));
		}
		clients.forEach(RedissonClient::shutdown);
		if (json) {
			Map<String, Object> doc = new LinkedHashMap<>();
			doc.put("tool", "redisson-bench");
			doc.put("redisson_version", redissonVersion());
			doc.put("java_version", System.getProperty("java.version"));
			doc.put("jvm", System.getProperty("java.vm.name"));
			doc.put("iterations", iters);
			doc.put("jvm_warmup", warm);
			doc.put("results", rows);
			StringBuilder b = new StringBuilder();
			Measure.json(b, doc);
			System.out.println(b);
		}
	}

	Map<String, Object> measure(int n, String what, String note, long warm, long iters, Pair p)
			throws Exception {
		long errors = 0;
		for (long i = 0; i < warm; i++) {
			try {
				p.run();
			} catch (Exception e) {
				errors++;
			}
		}
		if (errors > 0)
			say("  (warm-up: " + errors + " errors)");
		errors = 0;
		Exception first = null;
		long[] pair = new long[(int) iters], acq = new long[(int) iters], rel = new long[(int) iters];
		int k = 0;
		List<String> stat = uris.subList(0, n);
		System.gc(); // the warm-up's garbage is not the measured loop's
		double s0 = Measure.serverCpuUs(stat), c0 = Measure.cpuUs();
		long w0 = Measure.monoNs();
		for (long i = 0; i < iters; i++) {
			try {
				long t0 = Measure.monoNs(), ta = p.run(), t1 = Measure.monoNs();
				pair[k] = t1 - t0;
				acq[k] = ta - t0;
				rel[k++] = t1 - ta;
			} catch (Exception e) {
				errors++;
				if (first == null)
					first = e;
			}
		}
		long w1 = Measure.monoNs();
		double c1 = Measure.cpuUs(), s1 = Measure.serverCpuUs(stat);
		if (first != null)
			say("  first error: " + first);
		return row(n, what, note, iters, errors, java.util.Arrays.copyOf(pair, k),
				java.util.Arrays.copyOf(acq, k), java.util.Arrays.copyOf(rel, k),
				(w1 - w0) / 1e9, c1 - c0, s1 - s0);
	}

	Map<String, Object> row(int n, String what, String note, long iters, long errors, long[] pair,
			long[] acq, long[] rel, double wall, double cpu, double scpu) {
		Map<String, Object> r = new LinkedHashMap<>();
		r.put("scenario", 1);
		r.put("impl", "redisson");
		r.put("what", what);
		r.put("servers", n);
		r.put("paused", 0);
		r.put("threads", 1);
		r.put("samples", pair.length);
		r.put("errors", errors);
		Measure.putDist(r, "", pair);
		Measure.putDist(r, "acquire_", acq);
		Measure.putDist(r, "release_", rel);
		r.put("ops_per_s", iters / wall);
		r.put("cpu_us_per_op", cpu / iters);
		r.put("server_cpu_us_per_op", scpu / iters);
		r.put("iters", iters);
		r.put("wall_s", wall);
		r.put("cpu_us_total", cpu);
		r.put("server_cpu_us_total", scpu);
		if (samples)
			r.put("pair_ns", pair);
		r.put("note", note);
		say(String.format(java.util.Locale.ROOT,
				"  redisson %-20s n=%d  p50 %.1f  p99 %.1f  max %.1f us  %.0f ops/s  cpu %.1f us/op"
						+ "  server cpu %.1f us/op  errors=%d",
				what, n, r.get("p50_us"), r.get("p99_us"), r.get("max_us"), iters / wall,
				cpu / iters, scpu / iters, errors));
		return r;
	}
}
