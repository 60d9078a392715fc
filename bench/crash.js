#!/usr/bin/env node
// SPDX-License-Identifier: BSD-3-Clause
/*
 * crash.js - the crash case for the peers, as bench/dlock-herd --crash
 * measures it for dlock: a holder takes the lock with a lease of --ttl-ms
 * and is SIGKILLed while W waiters wait on it, one server.
 *
 * The workers are the contended case's (redsync-bench -contend-worker,
 * redisson-bench --contend-worker, node-redlock-contend.js) with
 * --crash-holder or --crash-waiter: W waiters spread over P processes as
 * contend.js does (--max-procs), each says "ready"; then the holder is told
 * "hold" and says "held T" once it has the lock; the waiters are told "go"
 * and each calls lock once (again after a failure: a poller may run out of
 * tries), then prints "got T WAITER" and unlocks; 100 ms after the go line
 * the holder is SIGKILLed. T is CLOCK_MONOTONIC ns.
 *
 * MONITOR (server timestamps) gives the holder's acquire command and every
 * waiter's acquire attempts on the lock: redsync's SET NX, node-redlock's
 * lock script (EVAL/EVALSHA, 1 key, the 10000 ms lease as its last
 * argument), Redisson's lock script (EVAL/EVALSHA with 1 key; its unlock has
 * 3). Reported, as dlock-herd does: the time from the holder's acquire
 * returning to the first waiter's lock call returning, that minus the TTL
 * (after the expiry), and the acquire attempts the server ran in the first
 * millisecond after the key's expiry (its acquire's server time + TTL), in
 * the busiest millisecond of the first 50, in the first 10 and in all.
 *
 * usage: node crash.js --impl redsync|redisson|node-redlock --uri redis://127.0.0.1:PORT
 *          [--waiters 64] [--max-procs P] [--ttl-ms 1000] [--warmup N]
 *          [--ready-timeout S] -- WORKER-COMMAND [ARGS...]
 * Prints one JSON document (tool "crash") for compare-table.js.
 */
'use strict';

const { spawn } = require('child_process');
const net = require('net');

function parseArgs(argv) {
	const o = { impl: '', uri: '', waiters: 64, maxProcs: 0, ttlMs: 1000, warmup: 100,
		readyTimeout: 180, cmd: [] };
	const keys = { '--impl': 'impl', '--uri': 'uri', '--waiters': 'waiters',
		'--max-procs': 'maxProcs', '--ttl-ms': 'ttlMs', '--warmup': 'warmup',
		'--ready-timeout': 'readyTimeout' };
	for (let i = 2; i < argv.length; i += 2) {
		if (argv[i] === '--') { o.cmd = argv.slice(i + 1); break; }
		const k = keys[argv[i]];
		if (!k || argv[i + 1] === undefined) throw new Error(`unknown argument ${argv[i]}`);
		o[k] = typeof o[k] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
	}
	if (!/^redis:\/\/127\.0\.0\.1:\d+\/?$/.test(o.uri)) throw new Error('--uri redis://127.0.0.1:PORT');
	if (!o.impl || o.cmd.length === 0) throw new Error('--impl and a worker command are required');
	o.procs = o.maxProcs > 0 ? Math.min(o.waiters, o.maxProcs) : o.waiters;
	o.perProc = Array.from({ length: o.procs },
		(_, i) => Math.floor(o.waiters / o.procs) + (i < o.waiters % o.procs ? 1 : 0));
	return o;
}

/* An acquire attempt on `name` in a MONITOR line, per implementation. */
function acquirePredicate(impl, name) {
	const q = `"${name.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
	const esc = q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
	const re = {
		redsync: new RegExp(`"set" ${esc} .*"nx"`, 'i'),
		'node-redlock': new RegExp(`"1" ${esc} "[^"]*" "10000"$`),
		redisson: new RegExp(`"eval(sha)?" .*"1" ${esc}( |$)`, 'i'),
	}[impl];
	if (!re) throw new Error(`no MONITOR filter for ${impl}`);
	return (line) => re.test(line);
}

/* MONITOR on the server: the server times (µs) of the lines that match. */
function monitor(uri, match) {
	const port = parseInt(/:(\d+)\/?$/.exec(uri)[1], 10);
	const m = { times: [], sock: null, ready: null };
	m.ready = new Promise((res, rej) => {
		const s = net.connect(port, '127.0.0.1', () => s.write('MONITOR\r\n'));
		m.sock = s;
		let buf = '', ok = false;
		s.setEncoding('latin1');
		s.on('data', (d) => {
			buf += d;
			let at;
			while ((at = buf.indexOf('\r\n')) >= 0) {
				const line = buf.slice(0, at);
				buf = buf.slice(at + 2);
				if (!ok) {
					if (line !== '+OK') rej(new Error(`MONITOR: ${line}`));
					ok = true;
					res();
					continue;
				}
				if (line[0] === '+' && match(line))
					m.times.push(Math.round(parseFloat(line.slice(1)) * 1e6));
			}
		});
		s.on('error', rej);
	});
	return m;
}

function startWorker(o, role, name, waiters) {
	const args = [...o.cmd.slice(1), '--uri', o.uri, '--name', name, '--ttl-ms', String(o.ttlMs),
		'--warmup', String(o.warmup), role === 'holder' ? '--crash-holder' : '--crash-waiter'];
	if (waiters > 1) args.push('--waiters', String(waiters));
	const p = spawn(o.cmd[0], args, { stdio: ['pipe', 'pipe', 'inherit'] });
	const w = { p, out: '', role };
	const seen = (re) => new Promise((res, rej) => {
		const check = () => {
			const m = re.exec(w.out);
			if (m) { p.stdout.off('data', check); res(m); }
		};
		p.stdout.on('data', check);
		p.on('close', (code) => rej(new Error(`${role} exited (${code}) before ${re}`)));
	});
	p.stdout.on('data', (d) => { w.out += d; });
	w.ready = seen(/^ready$/m);
	w.held = seen(/^held (\d+)$/m);
	w.done = new Promise((res, rej) => p.on('close', (code) => (code === 0 && /\nend\n$/.test(w.out)
		? res() : rej(new Error(`${role} failed (exit ${code})`)))));
	/* Unhandled otherwise: waiters never hold; the holder is killed. */
	w.held.catch(() => {});
	if (role === 'holder') w.done.catch(() => {});
	return w;
}

const within = (p, s, what) => {
	let t;
	return Promise.race([p, new Promise((_, rej) => {
		t = setTimeout(() => rej(new Error(`${what} not in ${s} s`)), s * 1e3);
	})]).finally(() => clearTimeout(t));
};

async function main() {
	const o = parseArgs(process.argv);
	const name = `crash:${o.impl}:${process.pid}:${Date.now()}`;
	console.error(`crash.js: ${o.impl}, ${o.waiters} waiters in ${o.procs} processes, ` +
		`holder's lease ${o.ttlMs} ms`);
	const mon = monitor(o.uri, acquirePredicate(o.impl, name));
	await mon.ready;
	const holder = startWorker(o, 'holder', name, 1);
	const ws = o.perProc.map((m) => startWorker(o, 'waiter', name, m));
	const all = [holder, ...ws];
	process.on('exit', () => all.forEach((w) => w.p.exitCode === null && w.p.kill('SIGKILL')));
	await within(Promise.all(all.map((w) => w.ready)), o.readyTimeout, 'workers ready');
	holder.p.stdin.write('hold\n');
	const heldAt = BigInt((await within(holder.held, 30, 'the holder\'s lock'))[1]);
	ws.forEach((w) => w.p.stdin.write('go\n'));
	await new Promise((res) => setTimeout(res, 100)); // all waiting on the holder
	holder.p.kill('SIGKILL');
	await within(Promise.all(ws.map((w) => w.done)), o.ttlMs / 1e3 + 60 + 0.1 * o.waiters,
		'every waiter\'s lock (a lost wake-up?)');
	await new Promise((res) => setTimeout(res, 100));
	mon.sock.destroy();

	let firstNext = null, got = 0;
	for (const w of ws)
		for (const m of w.out.matchAll(/^got (\d+)/gm)) {
			const t = BigInt(m[1]);
			got++;
			if (firstNext === null || t < firstNext) firstNext = t;
		}
	if (got !== o.waiters) throw new Error(`${got} of ${o.waiters} waiters got the lock`);
	const [holdUs, ...rest] = mon.times;
	if (holdUs === undefined) throw new Error('MONITOR saw no acquire: the filter is wrong');
	const exp = holdUs + o.ttlMs * 1000, perMs = new Array(50).fill(0);
	let n1 = 0, n10 = 0;
	for (const us of rest) {
		if (us >= exp && us < exp + 1000) n1++;
		if (us >= exp && us < exp + 10000) n10++;
		if (us >= exp && us < exp + 50000) perMs[Math.floor((us - exp) / 1000)]++;
	}
	const afterAcquire = Number(firstNext - heldAt) / 1e6;
	const r = { impl: o.impl, scenario: 7, what: 'crash', servers: 1, paused: 0,
		waiters: o.waiters, procs: o.procs, waiters_per_proc: o.perProc[0], ttl_ms: o.ttlMs,
		next_holder_after_expiry_ms: afterAcquire - o.ttlMs,
		next_holder_after_acquire_ms: afterAcquire, acquires_first_ms: n1,
		busiest_ms: Math.max(...perMs), acquires_first_10ms: n10, acquires_total: rest.length };
	console.error(`  ${o.impl}: next holder ${r.next_holder_after_expiry_ms.toFixed(1)} ms after ` +
		`the expiry; acquire attempts in the first ms after it ${n1}, busiest ms of the first 50 ` +
		`${r.busiest_ms}, first 10 ms ${n10}, all ${rest.length}`);
	process.stdout.write(JSON.stringify({ tool: 'crash', impl: o.impl, results: [r] }) + '\n');
}

main().then(() => process.exit(0), (e) => {
	console.error(`crash.js: ${e.message}`);
	process.exit(1);
});
