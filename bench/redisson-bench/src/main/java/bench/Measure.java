// SPDX-License-Identifier: BSD-3-Clause
package bench;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The measuring shared with dlock-bench: clocks, CPU, percentiles, JSON. */
final class Measure {
	private Measure() {
	}

	/** CLOCK_MONOTONIC on Linux, the clock of the other benches. */
	static long monoNs() {
		return System.nanoTime();
	}

	/** This JVM's user+sys CPU (all threads: netty, GC and JIT too), µs. */
	static double cpuUs() {
		var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory
				.getOperatingSystemMXBean();
		return os.getProcessCpuTime() / 1e3;
	}

	static void spinUntil(long t) {
		while (monoNs() < t)
			Thread.onSpinWait();
	}

	/** host:port of redis://127.0.0.1:PORT; nothing else is allowed. */
	static int portOf(String uri) {
		var m = java.util.regex.Pattern.compile("^redis://(127\\.0\\.0\\.1|localhost):(\\d+)/?$")
				.matcher(uri);
		if (!m.matches())
			throw new IllegalArgumentException("only redis://127.0.0.1:PORT is allowed (" + uri + ")");
		return Integer.parseInt(m.group(2));
	}

	/**
	 * The servers' own CPU (INFO cpu used_cpu_user+sys), summed, µs. Over a
	 * plain socket of its own, outside the timed pairs, so that no Redisson
	 * connection carries anything but the locks.
	 */
	static double serverCpuUs(List<String> uris) throws IOException {
		double total = 0;
		for (String u : uris) {
			try (Socket s = new Socket("127.0.0.1", portOf(u))) {
				OutputStream o = s.getOutputStream();
				o.write("*2\r\n$4\r\nINFO\r\n$3\r\ncpu\r\n".getBytes(StandardCharsets.US_ASCII));
				o.flush();
				InputStream in = new BufferedInputStream(s.getInputStream());
				String head = readLine(in);
				if (!head.startsWith("$"))
					throw new IOException("INFO cpu: " + head);
				String info = new String(in.readNBytes(Integer.parseInt(head.substring(1))),
						StandardCharsets.US_ASCII);
				for (String line : info.split("\r\n"))
					if (line.startsWith("used_cpu_sys:") || line.startsWith("used_cpu_user:"))
						total += Double.parseDouble(line.substring(line.indexOf(':') + 1)) * 1e6;
			}
		}
		return total;
	}

	private static String readLine(InputStream in) throws IOException {
		var sb = new StringBuilder();
		int c;
		while ((c = in.read()) >= 0 && c != '\n')
			if (c != '\r')
				sb.append((char) c);
		return sb.toString();
	}

	/** Nearest-rank percentiles of ns samples, in µs, into row under prefix. */
	static void putDist(Map<String, Object> row, String prefix, long[] ns) {
		long[] s = ns.clone();
		Arrays.sort(s);
		int n = s.length;
		double sum = 0;
		for (long x : s)
			sum += x;
		row.put(prefix + "p50_us", n == 0 ? null : s[(int) Math.ceil(0.50 * n) - 1] / 1e3);
		row.put(prefix + "p99_us", n == 0 ? null : s[(int) Math.ceil(0.99 * n) - 1] / 1e3);
		row.put(prefix + "mean_us", n == 0 ? null : sum / n / 1e3);
		row.put(prefix + "max_us", n == 0 ? null : s[n - 1] / 1e3);
	}

	/** Enough JSON for our rows: maps, lists, strings, numbers, long[]. */
	static void json(StringBuilder b, Object v) {
		if (v == null || (v instanceof Double d && (d.isNaN() || d.isInfinite()))) {
			b.append("null");
		} else if (v instanceof Double d) {
			b.append(String.format(Locale.ROOT, "%.3f", d));
		} else if (v instanceof Number || v instanceof Boolean) {
			b.append(v);
		} else if (v instanceof long[] a) {
			b.append('[');
			for (int i = 0; i < a.length; i++)
				b.append(i == 0 ? "" : ",").append(a[i]);
			b.append(']');
		} else if (v instanceof List<?> l) {
			b.append('[');
			for (int i = 0; i < l.size(); i++) {
				b.append(i == 0 ? "" : ",");
				json(b, l.get(i));
			}
			b.append(']');
		} else if (v instanceof Map<?, ?> m) {
			b.append('{');
			boolean first = true;
			for (var e : m.entrySet()) {
				b.append(first ? "" : ",");
				first = false;
				json(b, e.getKey().toString());
				b.append(':');
				json(b, e.getValue());
			}
			b.append('}');
		} else {
			b.append('"');
			for (char c : v.toString().toCharArray())
				b.append(c == '"' || c == '\\' ? "\\" + c : c < 0x20 ? " " : String.valueOf(c));
			b.append('"');
		}
	}
}
