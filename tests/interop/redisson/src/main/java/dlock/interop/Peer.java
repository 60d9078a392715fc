// SPDX-License-Identifier: BSD-3-Clause
package dlock.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.RedissonMultiLock;
import org.redisson.RedissonRedLock;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;

/**
 * The real Redisson, driven line by line by dlock's C interoperability tests
 * (tests/interop/peer.c).
 *
 * <pre>
 * java dlock.interop.Peer --servers redis://127.0.0.1:P1[,redis://...] --watchdog-ms N [--warmup N]
 * java dlock.interop.Peer --servers redis+cluster://[[USER]:PASSWORD@]127.0.0.1:P1[,127.0.0.1:P2...] ...
 * stdin:  SEQ WORKER COMMAND ARGS...      e.g. "7 w1 lock rlock orders -1"
 * stdout: SEQ ok VALUE T_START T_END     T_* = System.nanoTime() around the call
 *         SEQ err MESSAGE
 * </pre>
 *
 * The first line is "ready REDISSON_VERSION", after N lock+unlock cycles of
 * every kind on scratch names (--warmup): the JVM has then loaded and
 * compiled the paths the tests time, so a wake-up measures Redisson's steady
 * state, not its class loading. Every WORKER is one thread,
 * because Redisson's lock owner is the client id and the calling thread's id:
 * a test that wants two Java owners uses two workers. A worker runs its
 * commands in order; a blocking "lock" blocks that worker only.
 * System.nanoTime() is CLOCK_MONOTONIC on Linux, the clock the C side reads,
 * so the tests can subtract a C time from a Java one (wake-up delays).
 *
 * A redis+cluster:// address (dlock's form) is one Redis Cluster, named by
 * any of its nodes: one Redisson client in cluster mode, with Redisson's
 * default sharded subscription mode (AUTO: SSUBSCRIBE and SPUBLISH on
 * Redis 7+). Its commas separate seeds, not servers.
 *
 * Commands (KIND: rlock, fair, fenced, read, write on the first server;
 * multi, red: RedissonMultiLock / RedissonRedLock over NAME on every server;
 * LEASE -1 means no lease, i.e. Redisson's watchdog):
 *   lock KIND NAME LEASE          VALUE: "-", or the token for fenced
 *   try KIND NAME WAIT LEASE      VALUE: true/false, or the token/null for fenced
 *   unlock KIND NAME              force KIND NAME (VALUE: true/false)
 *   count|held|locked|ttl KIND NAME   getHoldCount, isHeldByCurrentThread,
 *                                 isLocked, remainTimeToLive
 *   token NAME                    RFencedLock.getToken()
 *   owner                         the hash field this worker writes: ID:THREAD
 *   latch OP NAME [ARG]           RCountDownLatch (Latches.java)
 *   sem-... pes-...               semaphores: see Semaphores.java
 *   quit                          (no WORKER) shut down and exit
 */
public final class Peer {
	private final RedissonClient[] clients;
	private final Map<String, ExecutorService> workers = new HashMap<>();
	/* One lock object per kind and name, as an application keeps it: an
	 * RLock object remembers the lease it last locked with, and a partial
	 * unlock resets the TTL to that (a fresh object: the watchdog timeout). */
	private final Map<String, RLock> locks = new ConcurrentHashMap<>();
	private final PrintStream out;

	private Peer(RedissonClient[] clients, PrintStream out) {
		this.clients = clients;
		this.out = out;
	}

	public static void main(String[] args) throws Exception {
		String servers = null;
		long watchdogMs = 30000;
		int warmup = 0;
		for (int i = 0; i + 1 < args.length; i += 2) {
			switch (args[i]) {
			case "--servers" -> servers = args[i + 1];
			case "--watchdog-ms" -> watchdogMs = Long.parseLong(args[i + 1]);
			case "--warmup" -> warmup = Integer.parseInt(args[i + 1]);
			default -> throw new IllegalArgumentException("unknown option " + args[i]);
			}
		}
		if (servers == null)
			throw new IllegalArgumentException("--servers is required");
		String[] addresses = servers.startsWith(CLUSTER_SCHEME) ? new String[] { servers } : servers.split(",");
		RedissonClient[] clients = new RedissonClient[addresses.length];
		for (int i = 0; i < addresses.length; i++)
			clients[i] = connect(addresses[i], watchdogMs);
		PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
		Peer peer = new Peer(clients, out);
		peer.warmUp(warmup);
		peer.serve(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
	}

	private static final String CLUSTER_SCHEME = "redis+cluster://";

	/* Redisson's defaults but the watchdog, which the tests shorten to stay fast. */
	private static RedissonClient connect(String address, long watchdogMs) {
		Config config = new Config();
		config.setLockWatchdogTimeout(watchdogMs);
		if (address.startsWith(CLUSTER_SCHEME))
			useCluster(config, address.substring(CLUSTER_SCHEME.length()));
		else
			config.useSingleServer().setAddress(address);
		return Redisson.create(config);
	}

	/* "[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]": every seed a node address;
	 * the rest (sharded subscription AUTO, subscriptions at the primaries)
	 * Redisson's defaults, the same in 3.x and 4.x. */
	private static void useCluster(Config config, String rest) {
		ClusterServersConfig cluster = config.useClusterServers();
		int at = rest.lastIndexOf('@');
		if (at >= 0) {
			String credentials = rest.substring(0, at);
			int colon = credentials.indexOf(':');
			if (colon > 0)
				cluster.setUsername(credentials.substring(0, colon));
			cluster.setPassword(credentials.substring(colon + 1));
			rest = rest.substring(at + 1);
		}
		for (String seed : rest.split(","))
			cluster.addNodeAddress("redis://" + (seed.contains(":") ? seed : seed + ":6379"));
	}

	private void warmUp(int cycles) throws Exception {
		String[] kinds = clients.length > 1 ? new String[] { "rlock", "fair", "fenced", "multi", "red" }
				: new String[] { "rlock", "fair", "fenced", "read" };
		for (int i = 0; i < cycles; i++) {
			for (String kind : kinds) {
				RLock lock = lockOf(kind, "dlock-interop-warmup");
				lock(lock, 10000);
				lock.isHeldByCurrentThread();
				lock.unlock();
			}
		}
	}

	private void serve(BufferedReader in) throws Exception {
		reply("ready " + Redisson.class.getPackage().getImplementationVersion());
		String line;
		while ((line = in.readLine()) != null) {
			String[] w = line.trim().split(" +");
			if (w.length >= 2 && w[1].equals("quit"))
				break;
			if (w.length < 3) {
				reply((w.length > 0 ? w[0] : "?") + " err malformed request: " + line);
				continue;
			}
			workers.computeIfAbsent(w[1], this::newWorker).submit(() -> run(w));
		}
		shutdown();
	}

	private ExecutorService newWorker(String name) {
		return Executors.newSingleThreadExecutor(r -> {
			Thread t = new Thread(r, "peer-" + name);
			t.setDaemon(true);
			return t;
		});
	}

	private void shutdown() throws InterruptedException {
		for (ExecutorService w : workers.values())
			w.shutdownNow();
		for (RedissonClient c : clients)
			c.shutdown(0, 2, TimeUnit.SECONDS);
		System.exit(0);
	}

	private void run(String[] w) {
		long start = System.nanoTime();
		try {
			String value = execute(w);
			long end = System.nanoTime();
			reply(w[0] + " ok " + value + " " + start + " " + end);
		} catch (Throwable e) {
			String msg = (e.getClass().getSimpleName() + ": " + e.getMessage()).replaceAll("\\s+", " ");
			reply(w[0] + " err " + msg);
		}
	}

	private synchronized void reply(String line) {
		out.println(line);
	}

	private String execute(String[] w) throws Exception {
		String cmd = w[2];
		String sem = Semaphores.execute(clients[0], w);
		if (sem != null)
			return sem;
		switch (cmd) {
		case "owner":
			return clients[0].getId() + ":" + Thread.currentThread().getId();
		case "token":
			return String.valueOf(clients[0].getFencedLock(w[3]).getToken());
		case "latch": // RCountDownLatch: see Latches.java
			return Latches.execute(clients[0], w);
		default:
			break;
		}
		String kind = w[3];
		RLock lock = lockOf(kind, w[4]);
		switch (cmd) {
		case "lock":
			return lock(lock, Long.parseLong(w[5]));
		case "try":
			return tryLock(lock, Long.parseLong(w[5]), Long.parseLong(w[6]));
		case "unlock":
			lock.unlock();
			return "-";
		case "force":
			return String.valueOf(lock.forceUnlock());
		case "count":
			return String.valueOf(lock.getHoldCount());
		case "held":
			return String.valueOf(lock.isHeldByCurrentThread());
		case "locked":
			return String.valueOf(lock.isLocked());
		case "ttl":
			return String.valueOf(lock.remainTimeToLive());
		default:
			throw new IllegalArgumentException("unknown command " + cmd);
		}
	}

	private RLock lockOf(String kind, String name) {
		return locks.computeIfAbsent(kind + " " + name, k -> newLock(kind, name));
	}

	private RLock newLock(String kind, String name) {
		RedissonClient first = clients[0];
		return switch (kind) {
		case "rlock" -> first.getLock(name);
		case "fair" -> first.getFairLock(name);
		case "fenced" -> first.getFencedLock(name);
		case "read" -> first.getReadWriteLock(name).readLock();
		case "write" -> first.getReadWriteLock(name).writeLock();
		case "multi" -> new RedissonMultiLock(onEveryServer(name));
		case "red" -> new RedissonRedLock(onEveryServer(name));
		default -> throw new IllegalArgumentException("unknown lock kind " + kind);
		};
	}

	private RLock[] onEveryServer(String name) {
		RLock[] locks = new RLock[clients.length];
		for (int i = 0; i < clients.length; i++)
			locks[i] = clients[i].getLock(name);
		return locks;
	}

	private static String lock(RLock lock, long leaseMs) throws Exception {
		if (lock instanceof RFencedLock f)
			return String.valueOf(leaseMs < 0 ? f.lockAndGetToken() : f.lockAndGetToken(leaseMs, TimeUnit.MILLISECONDS));
		if (leaseMs < 0)
			lock.lock();
		else
			lock.lock(leaseMs, TimeUnit.MILLISECONDS);
		return "-";
	}

	private static String tryLock(RLock lock, long waitMs, long leaseMs) throws Exception {
		if (lock instanceof RFencedLock f)
			return String.valueOf(f.tryLockAndGetToken(waitMs, leaseMs, TimeUnit.MILLISECONDS));
		return String.valueOf(lock.tryLock(waitMs, leaseMs, TimeUnit.MILLISECONDS));
	}
}
