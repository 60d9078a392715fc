#!/usr/bin/env node
// SPDX-License-Identifier: BSD-3-Clause
/*
 * node-redlock-contend.js - one process of the contended case (bench/contend.js)
 * for node-redlock 4.x (npm `redlock@4.2.0`, ioredis): N such processes on one
 * lock on one server, each looping redlock.lock(name, 10000) with redlock's
 * defaults (retryCount 10, retryDelay 200 ms, retryJitter 100 ms: it polls),
 * hold --hold-us (spinning), unlock, sleep --think-us: --warm-s seconds
 * unrecorded, then --duration s measured. It warms up on a lock of its own,
 * prints "ready", waits for a line on stdin, and at the end prints "window START END", "cpu US", "failed N" (lock calls
 * that ran out of retries; it asks again) and "h ACQUIRED UNLOCK_CALLED
 * UNLOCK_RETURNED" per hold, process.hrtime.bigint() = CLOCK_MONOTONIC ns.
 *
 * usage: node node-redlock-contend.js --uri redis://127.0.0.1:PORT --name LOCK
 *          [--duration S] [--warm-s S] [--hold-us N] [--think-us N] [--warmup N]
 */
'use strict';

const Redlock = require('redlock');
const Redis = require('ioredis');
const readline = require('readline');

const LEASE_MS = 10000;
const opt = { uri: '', name: '', duration: 10, warmS: 3, holdUs: 100, thinkUs: 1000, warmup: 2000 };
for (let i = 2; i < process.argv.length; i += 2) {
	const k = process.argv[i], v = process.argv[i + 1];
	const key = { '--uri': 'uri', '--name': 'name', '--duration': 'duration',
		'--warm-s': 'warmS', '--hold-us': 'holdUs', '--think-us': 'thinkUs', '--warmup': 'warmup' }[k];
	if (!key || v === undefined) throw new Error(`unknown argument ${k}`);
	opt[key] = key === 'uri' || key === 'name' ? v : Number(v);
}
const m = /^redis:\/\/127\.0\.0\.1:(\d+)\/?$/.exec(opt.uri);
if (!m || !opt.name) throw new Error('--uri redis://127.0.0.1:PORT and --name are required');

const now = () => process.hrtime.bigint();
const sleep = (us) => new Promise((res) => setTimeout(res, us / 1000));

function goLine() {
	return new Promise((res, rej) => {
		const rl = readline.createInterface({ input: process.stdin });
		rl.once('line', () => { res(); rl.close(); });
		rl.once('close', () => rej(new Error('no go line')));
	});
}

async function main() {
	const client = new Redis({ host: '127.0.0.1', port: parseInt(m[1], 10) });
	const redlock = new Redlock([client]); // the defaults: a user's polling
	redlock.on('clientError', () => { /* counted as failures */ });
	for (let i = 0; i < opt.warmup; i++) {
		const l = await redlock.lock(`${opt.name}:warm:${process.pid}`, LEASE_MS);
		await l.unlock();
	}
	process.stdout.write('ready\n');
	await goLine();
	await loop(redlock, opt.warmS);
	const r = await loop(redlock, opt.duration);
	process.stdout.write(`window ${r.t0} ${r.t1}\ncpu ${r.cpu}\nfailed ${r.failed}\n` +
		r.holds.join('\n') + (r.holds.length ? '\n' : '') + 'end\n', () => process.exit(0));
	client.disconnect();
}

/* The worker's loop for secs seconds. */
async function loop(redlock, secs) {
	const holds = [];
	let failed = 0;
	const c0 = process.cpuUsage(), t0 = now();
	const end = t0 + BigInt(Math.round(secs * 1e9));
	while (now() < end) {
		let lock;
		try {
			lock = await redlock.lock(opt.name, LEASE_MS);
		} catch (e) {
			failed++; // out of retries: ask again, as a user would
			continue;
		}
		const a = now(), until = a + BigInt(opt.holdUs * 1000);
		while (now() < until) { /* held: spin, as a short critical section would */ }
		const u = now();
		await lock.unlock();
		holds.push(`h ${a} ${u} ${now()}`);
		if (opt.thinkUs > 0) await sleep(opt.thinkUs);
	}
	const c = process.cpuUsage(c0);
	return { holds, failed, t0, t1: now(), cpu: c.user + c.system };
}
main().catch((e) => {
	console.error(`node-redlock-contend: ${e.stack || e}`);
	process.exit(1);
});
