#!/usr/bin/env node
// SPDX-License-Identifier: BSD-3-Clause
/*
 * contend.js - the contended case, the same for every implementation: W
 * waiters on one lock on one server, spread over P worker processes
 * (dlock-contend, redsync-bench -contend-worker, redisson-bench
 * --contend-worker, node-redlock-contend.js). P is W, or --max-procs if that
 * is smaller: then each worker runs W/P waiters (the first W mod P one more;
 * it is passed --waiters M), each its own loop (node-redlock: an async loop
 * with its own connection; Redisson: a thread, one RedissonClient per JVM).
 *
 * It starts the P workers (each warms up on a lock of its own and says
 * "ready"), sends every worker its go line, "go WARM_END END" (CLOCK_MONOTONIC
 * ns: the same deadlines for all); they contend --warm-s seconds unrecorded
 * (a JIT compiles the waiting paths too), then --duration seconds measured.
 * It reads the server's INFO cpu around that, and when all are done merges
 * their holds on CLOCK_MONOTONIC, which all of them
 * read (one Linux machine). Sorted by acquisition time, consecutive holds by
 * two different waiters are a hand-off; its wait is the time from the
 * previous holder's unlock call returning to the next holder's lock call
 * returning (and, beside it, from the unlock call starting: that one cannot
 * be negative). Consecutive holds by one waiter are a re-acquisition: the
 * releaser asked again before any waiter got in. A hold that starts before
 * the previous one's unlock was called is an overlap, a broken lock.
 *
 * Only holds inside the common window (WARM_END to END) count; rates are per
 * second of that window. Client CPU is the workers' own, summed, per
 * acquisition; server CPU is INFO cpu's, per acquisition.
 *
 * A waiter with no acquisition in the window while the others handed the
 * lock on is a lost wake-up (or starvation): contend.js says so on stderr and
 * exits 3 (after printing its JSON), unless --starve-ok (a polling client has
 * no queue and may starve a waiter; then it is only counted, "starved"). A
 * worker still in a lock call 60 s (+ 0.1 s per waiter) after END is one
 * for good: contend.js fails (exit 1).
 *
 * usage: node contend.js --impl NAME --uri redis://127.0.0.1:PORT [--waiters 8]
 *          [--max-procs P] [--duration S] [--warm-s S] [--hold-us N] [--think-us N]
 *          [--warmup N] [--ready-timeout S] [--starve-ok] -- WORKER-COMMAND [ARGS...]
 * (--procs N is the old spelling of --waiters N.)
 * Prints one JSON document (tool "contend") for compare-table.js.
 */
'use strict';

const { spawn } = require('child_process');
const net = require('net');

function parseArgs(argv) {
	const o = { impl: '', uri: '', waiters: 8, maxProcs: 0, duration: 10, warmS: 3, holdUs: 100,
		thinkUs: 1000, warmup: 2000, readyTimeout: 180, starveOk: false, cmd: [] };
	const keys = { '--impl': 'impl', '--uri': 'uri', '--procs': 'waiters', '--waiters': 'waiters',
		'--max-procs': 'maxProcs', '--duration': 'duration', '--warm-s': 'warmS',
		'--hold-us': 'holdUs', '--think-us': 'thinkUs', '--warmup': 'warmup',
		'--ready-timeout': 'readyTimeout' };
	for (let i = 2; i < argv.length; i += 2) {
		if (argv[i] === '--') { o.cmd = argv.slice(i + 1); break; }
		if (argv[i] === '--starve-ok') { o.starveOk = true; i--; continue; }
		const k = keys[argv[i]];
		if (!k || argv[i + 1] === undefined) throw new Error(`unknown argument ${argv[i]}`);
		o[k] = typeof o[k] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
	}
	if (!/^redis:\/\/127\.0\.0\.1:\d+\/?$/.test(o.uri)) throw new Error('--uri redis://127.0.0.1:PORT');
	if (!o.impl || o.cmd.length === 0) throw new Error('--impl and a worker command are required');
	if (!(o.waiters >= 1)) throw new Error('--waiters must be at least 1');
	o.procs = o.maxProcs > 0 ? Math.min(o.waiters, o.maxProcs) : o.waiters;
	/* Waiters per process: W/P each, the first W mod P one more. */
	o.perProc = Array.from({ length: o.procs },
		(_, i) => Math.floor(o.waiters / o.procs) + (i < o.waiters % o.procs ? 1 : 0));
	o.base = o.perProc.map((_, i) => o.perProc.slice(0, i).reduce((a, x) => a + x, 0));
	return o;
}

/* The server's own CPU, INFO cpu used_cpu_user+sys, µs. */
function serverCpuUs(uri) {
	const port = parseInt(/:(\d+)\/?$/.exec(uri)[1], 10);
	return new Promise((res, rej) => {
		const s = net.connect(port, '127.0.0.1', () => s.write('INFO cpu\r\n'));
		let buf = '';
		s.on('data', (d) => {
			buf += d;
			const m = /^\$(\d+)\r\n/.exec(buf);
			if (!m || buf.length < m[0].length + parseInt(m[1], 10)) return;
			s.destroy();
			let t = 0;
			for (const k of ['used_cpu_sys', 'used_cpu_user'])
				t += parseFloat(new RegExp(`${k}:([0-9.]+)`).exec(buf)[1]) * 1e6;
			res(t);
		});
		s.on('error', rej);
	});
}

function startWorker(o, i, name) {
	const args = [...o.cmd.slice(1), '--uri', o.uri, '--name', name, '--duration',
		String(o.duration), '--warm-s', String(o.warmS), '--hold-us', String(o.holdUs),
		'--think-us', String(o.thinkUs), '--warmup', String(o.warmup)];
	if (o.perProc[i] > 1) args.push('--waiters', String(o.perProc[i]));
	const p = spawn(o.cmd[0], args, { stdio: ['pipe', 'pipe', 'inherit'] });
	const w = { i, p, out: '', ready: null, done: null };
	w.ready = new Promise((res, rej) => {
		p.stdout.on('data', (d) => {
			w.out += d;
			if (/^ready$/m.test(w.out)) res();
		});
		p.on('close', (code) => rej(new Error(`worker ${i} exited (${code}) before ready`)));
	});
	/* 'close', not 'exit': after the last of its stdout has been read. */
	w.done = new Promise((res, rej) => p.on('close', (code) => (code === 0 && /\nend\n$/.test(w.out)
		? res() : rej(new Error(`worker ${i} failed (exit ${code})`)))));
	return w;
}

/* A hold line is "h ACQUIRED UNLOCK_CALLED UNLOCK_RETURNED [WAITER]", WAITER
 * the waiter's index in its process (0 when absent: one waiter). */
function parseWorker(o, w) {
	const r = { holds: [], start: 0n, end: 0n, cpu: 0, failed: 0 };
	for (const line of w.out.split('\n')) {
		const f = line.split(' ');
		if (f[0] === 'h') {
			const k = f[4] === undefined ? 0 : Number(f[4]);
			if (!(k >= 0 && k < o.perProc[w.i])) throw new Error(`worker ${w.i}: waiter ${f[4]}?`);
			r.holds.push({ p: w.i, w: o.base[w.i] + k, a: BigInt(f[1]), u: BigInt(f[2]),
				r: BigInt(f[3]) });
		}
		else if (f[0] === 'window') { r.start = BigInt(f[1]); r.end = BigInt(f[2]); }
		else if (f[0] === 'cpu') r.cpu = Number(f[1]);
		else if (f[0] === 'failed') r.failed = Number(f[1]);
	}
	return r;
}

const pct = (s, p) => (s.length ? s[Math.ceil(p * s.length) - 1] / 1e3 : null);
const sorted = (a) => Float64Array.from(a).sort();

/* Hand-offs, re-acquisitions and overlaps of holds sorted by acquisition. */
function merge(o, ws, s0, s1) {
	/* The common deadlines; the workers' own windows lie within them, or
	 * start later when a lock call spanned WARM_END. */
	const from = o.warmEnd, to = o.end;
	const all = ws.flatMap((w) => w.holds).sort((x, y) => (x.a < y.a ? -1 : x.a > y.a ? 1 : 0));
	const gap = [], gapCall = [], per = new Array(o.procs).fill(0);
	const perW = new Array(o.waiters).fill(0);
	let acq = 0, handoffs = 0, overlaps = 0;
	for (let i = 0; i < all.length; i++) {
		const h = all[i], prev = all[i - 1];
		if (prev && h.a < prev.u) overlaps++;
		if (h.a < from || h.a > to) continue;
		acq++;
		per[h.p]++;
		perW[h.w]++;
		if (!prev || prev.w === h.w) continue;
		handoffs++;
		gap.push(Number(h.a - prev.r));
		gapCall.push(Number(h.a - prev.u));
	}
	const secs = Number(to - from) / 1e9, g = sorted(gap), gc = sorted(gapCall);
	const holdsTotal = all.length, cpu = ws.reduce((t, w) => t + w.cpu, 0);
	const pw = sorted(perW);
	return { scenario: 6, impl: o.impl, what: 'contended', servers: 1, paused: 0,
		threads: o.waiters, waiters: o.waiters, procs: o.procs, waiters_per_proc: o.perProc[0],
		hold_us: o.holdUs, think_us: o.thinkUs,
		window_s: secs, acquisitions: acq, handoffs, acquisitions_per_s: acq / secs,
		handoffs_per_s: handoffs / secs, reacquire_share: acq ? (acq - handoffs) / acq : null,
		wait_p50_us: pct(g, 0.5), wait_p99_us: pct(g, 0.99), wait_max_us: pct(g, 1),
		wait_call_p50_us: pct(gc, 0.5), wait_call_p99_us: pct(gc, 0.99),
		per_process: per, per_waiter_min: pw[0], per_waiter_p50: pw[Math.ceil(pw.length / 2) - 1],
		per_waiter_max: pw[pw.length - 1], starved: perW.filter((x) => x === 0).length,
		starve_ok: o.starveOk, cpu_us_per_op: holdsTotal ? cpu / holdsTotal : null,
		server_cpu_us_per_op: holdsTotal ? (s1 - s0) / holdsTotal : null,
		failed_lock_calls: ws.reduce((t, w) => t + w.failed, 0), overlaps, errors: overlaps };
}

async function main() {
	const o = parseArgs(process.argv);
	const name = `contend:${o.impl}:${process.pid}:${Date.now()}`;
	console.error(`contend.js: ${o.impl}, ${o.waiters} waiters in ${o.procs} processes ` +
		`(${o.perProc[0]} per process at most), ${o.warmS} + ${o.duration} s, hold ` +
		`${o.holdUs} µs, think ${o.thinkUs} µs`);
	const ws = Array.from({ length: o.procs }, (_, i) => startWorker(o, i, name));
	const kill = () => ws.forEach((w) => w.p.exitCode === null && w.p.kill('SIGKILL'));
	process.on('exit', kill);
	let timer;
	await Promise.race([Promise.all(ws.map((w) => w.ready)), new Promise((_, rej) => {
		timer = setTimeout(() => rej(new Error('workers not ready in time')), o.readyTimeout * 1e3);
	})]);
	clearTimeout(timer);
	/* The same deadlines for all, on CLOCK_MONOTONIC: with hundreds of
	 * processes, some would read a bare go line much later than others. */
	const goAt = process.hrtime.bigint() + 100000000n;
	o.warmEnd = goAt + BigInt(Math.round(o.warmS * 1e9));
	o.end = o.warmEnd + BigInt(Math.round(o.duration * 1e9));
	ws.forEach((w) => w.p.stdin.write(`go ${o.warmEnd} ${o.end}\n`));
	/* The warm phase is not the server's measured CPU either. */
	await new Promise((res) => setTimeout(res, Number(o.warmEnd - process.hrtime.bigint()) / 1e6));
	const s0 = await serverCpuUs(o.uri);
	/* A waiter stuck in its lock call keeps its process from ending; the
	 * others, still waiting at END, each take the lock once more first. */
	const grace = 60 + 0.1 * o.waiters;
	await Promise.race([Promise.all(ws.map((w) => w.done)), new Promise((_, rej) => {
		timer = setTimeout(() => rej(new Error(`LOST WAKE-UP? worker(s) ` +
			ws.filter((w) => w.p.exitCode === null).map((w) => w.i).join(',') +
			` still in a lock call ${grace} s after the window`)),
			Number(o.end - process.hrtime.bigint()) / 1e6 + grace * 1e3);
	})]);
	clearTimeout(timer);
	const s1 = await serverCpuUs(o.uri);
	const r = merge(o, ws.map((w) => ({ ...parseWorker(o, w), i: w.i })), s0, s1);
	const f = (x) => (x == null ? 'n/a' : x.toFixed(1));
	console.error(`  ${o.impl}: ${f(r.handoffs_per_s)} hand-offs/s of ${f(r.acquisitions_per_s)} ` +
		`acquisitions/s; wait after unlock p50 ${f(r.wait_p50_us)} p99 ${f(r.wait_p99_us)} µs; ` +
		`cpu ${f(r.cpu_us_per_op)} server ${f(r.server_cpu_us_per_op)} µs/acq; per process ` +
		`[${r.per_process}]; per waiter ${r.per_waiter_min}-${r.per_waiter_max}; failed calls ` +
		`${r.failed_lock_calls}; overlaps ${r.overlaps}`);
	process.stdout.write(JSON.stringify({ tool: 'contend', impl: o.impl, results: [r] }) + '\n');
	if (r.starved > 0) {
		const what = `${r.starved} of ${o.waiters} waiters never got the lock in the ` +
			`${r.window_s.toFixed(1)} s window while ${r.handoffs} hand-offs went to the others`;
		if (!o.starveOk) {
			console.error(`contend.js: ${o.impl}: LOST WAKE-UP: ${what}`);
			process.exitCode = 3;
		} else {
			console.error(`contend.js: ${o.impl}: WARNING, starved waiters: ${what} (a polling ` +
				'client has no queue; counted, not fatal: --starve-ok)');
		}
	}
}

main().catch((e) => {
	console.error(`contend.js: ${e.message}`);
	process.exit(1);
});
