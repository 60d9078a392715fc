#!/usr/bin/env node
// SPDX-License-Identifier: BSD-3-Clause
/*
 * node-redlock-contend.js - one process of the contended case (bench/contend.js)
 * for node-redlock 4.x (npm `redlock@4.2.0`, ioredis): processes on one lock
 * on one server, each running --waiters M waiters (default 1), concurrent
 * async loops with their own ioredis connection and Redlock each, as M
 * independent clients in one process; each loops redlock.lock(name, 10000)
 * with redlock's defaults (retryCount 10, retryDelay 200 ms, retryJitter
 * 100 ms: it polls), hold --hold-us (spinning), unlock, sleep --think-us:
 * --warm-s seconds unrecorded, then --duration s measured. It warms up on a
 * lock of its own, prints "ready", waits for its go line, and at the end
 * prints "window START END" (the latest waiter's start of the measured phase,
 * the earliest waiter's end), "cpu US" (the process's, over the measured
 * phase), "failed N" (lock calls that ran out of retries; it asks again) and
 * "h ACQUIRED UNLOCK_CALLED UNLOCK_RETURNED WAITER" per hold,
 * process.hrtime.bigint() = CLOCK_MONOTONIC ns, WAITER the loop's index.
 *
 * With --crash-holder or --crash-waiter it is a process of the crash case
 * instead (bench/crash.js; see crash() below).
 *
 * usage: node node-redlock-contend.js --uri redis://127.0.0.1:PORT --name LOCK
 *          [--waiters M] [--duration S] [--warm-s S] [--hold-us N] [--think-us N]
 *          [--warmup N] [--crash-holder | --crash-waiter] [--ttl-ms N]
 */
'use strict';

const Redlock = require('redlock');
const Redis = require('ioredis');
const readline = require('readline');

const LEASE_MS = 10000;
const opt = { uri: '', name: '', waiters: 1, duration: 10, warmS: 3, holdUs: 100, thinkUs: 1000,
	warmup: 2000, ttlMs: 1000, crash: '' };
for (let i = 2; i < process.argv.length; i += 2) {
	const k = process.argv[i], v = process.argv[i + 1];
	if (k === '--crash-holder' || k === '--crash-waiter') {
		opt.crash = k.slice(8);
		i--;
		continue;
	}
	const key = { '--uri': 'uri', '--name': 'name', '--waiters': 'waiters', '--duration': 'duration',
		'--warm-s': 'warmS', '--hold-us': 'holdUs', '--think-us': 'thinkUs', '--warmup': 'warmup',
		'--ttl-ms': 'ttlMs' }[k];
	if (!key || v === undefined) throw new Error(`unknown argument ${k}`);
	opt[key] = key === 'uri' || key === 'name' ? v : Number(v);
}
const m = /^redis:\/\/127\.0\.0\.1:(\d+)\/?$/.exec(opt.uri);
if (!m || !opt.name) throw new Error('--uri redis://127.0.0.1:PORT and --name are required');

const now = () => process.hrtime.bigint();
const sleep = (us) => new Promise((res) => setTimeout(res, us / 1000));

/* "go WARM_END END" (CLOCK_MONOTONIC ns, the same for all processes), or a
 * bare "go": now + --warm-s and + --duration. */
function goLine() {
	return new Promise((res, rej) => {
		const rl = readline.createInterface({ input: process.stdin });
		rl.once('line', (line) => {
			const g = /^go (\d+) (\d+)/.exec(line);
			const w = g ? BigInt(g[1]) : now() + BigInt(Math.round(opt.warmS * 1e9));
			res([w, g ? BigInt(g[2]) : w + BigInt(Math.round(opt.duration * 1e9))]);
			rl.close();
		});
		rl.once('close', () => rej(new Error('no go line')));
	});
}

async function main() {
	const port = parseInt(m[1], 10);
	const clients = [], locks = [];
	for (let k = 0; k < opt.waiters; k++) {
		clients.push(new Redis({ host: '127.0.0.1', port }));
		locks.push(new Redlock([clients[k]])); // the defaults: a user's polling
		locks[k].on('clientError', () => { /* counted as failures */ });
	}
	for (let i = 0; i < opt.warmup; i++) {
		const l = await locks[i % opt.waiters].lock(`${opt.name}:warm:${process.pid}`, LEASE_MS);
		await l.unlock();
	}
	process.stdout.write('ready\n');
	if (opt.crash) return crash(locks, clients);
	const [warmEnd, end] = await goLine();
	let c0 = null;
	const rs = await Promise.all(locks.map((rl, k) => loop(rl, k, warmEnd, end, () => {
		if (c0 === null) c0 = process.cpuUsage();
	})));
	const c = process.cpuUsage(c0);
	const from = rs.reduce((x, r) => (r.t0 > x ? r.t0 : x), 0n);
	const to = rs.reduce((x, r) => (x === 0n || r.t1 < x ? r.t1 : x), 0n);
	const holds = rs.flatMap((r) => r.holds);
	process.stdout.write(`window ${from} ${to}\ncpu ${c.user + c.system}\n` +
		`failed ${rs.reduce((x, r) => x + r.failed, 0)}\n` +
		holds.join('\n') + (holds.length ? '\n' : '') + 'end\n', () => process.exit(0));
	clients.forEach((cl) => cl.disconnect());
}

/* One waiter's loop: unrecorded until warmEnd, recorded until end. */
async function loop(redlock, k, warmEnd, end, measuring) {
	const holds = [];
	let failed = 0, t0 = null;
	for (;;) {
		const t = now();
		if (t >= end) break;
		if (t0 === null && t >= warmEnd) {
			t0 = t;
			measuring();
		}
		let lock;
		try {
			lock = await redlock.lock(opt.name, LEASE_MS);
		} catch (e) {
			if (t0 !== null) failed++; // out of retries: ask again, as a user would
			continue;
		}
		const a = now(), until = a + BigInt(opt.holdUs * 1000);
		while (now() < until) { /* held: spin, as a short critical section would */ }
		const u = now();
		await lock.unlock();
		if (t0 !== null) holds.push(`h ${a} ${u} ${now()} ${k}`);
		if (opt.thinkUs > 0) await sleep(opt.thinkUs);
	}
	return { holds, failed, t0: t0 === null ? end : t0, t1: now() };
}
/* The crash case (bench/crash.js): the holder takes the lock with a lease of
 * --ttl-ms and waits to be killed; each waiter calls lock once (again when
 * out of retries), prints "got T WAITER" and unlocks. */
async function crash(locks, clients) {
	await goLine();
	if (opt.crash === 'holder') {
		await locks[0].lock(opt.name, opt.ttlMs);
		process.stdout.write(`held ${now()}\n`);
		setInterval(() => {}, 1 << 30);
		return;
	}
	const got = await Promise.all(locks.map(async (rl, k) => {
		for (;;) {
			let lock;
			try {
				lock = await rl.lock(opt.name, LEASE_MS);
			} catch (e) {
				continue; // out of retries: ask again, as a user would
			}
			const a = now();
			await lock.unlock();
			return `got ${a} ${k}\n`;
		}
	}));
	process.stdout.write(got.join('') + 'end\n', () => process.exit(0));
	clients.forEach((cl) => cl.disconnect());
}

main().catch((e) => {
	console.error(`node-redlock-contend: ${e.stack || e}`);
	process.exit(1);
});
