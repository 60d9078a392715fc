#!/usr/bin/env node
// SPDX-License-Identifier: BSD-3-Clause
/*
 * node-redlock-bench.js - the peer of dlock-bench (SPEC §9): node-redlock 4.x
 * (npm `redlock@4.2.0`) with ioredis, on the same local servers, measured the
 * same way: per lock+unlock pair, process.hrtime.bigint() latencies (p50/p99
 * nearest rank, µs) and process.cpuUsage() user+system per pair.
 *
 *   1  uncontended redlock.lock(resource, 10000) then lock.unlock() on the
 *      first 1, 3 and 5 servers (retryCount 0, driftFactor 0.01; ioredis
 *      defaults, i.e. no command timeout);
 *   5  5 servers with ioredis `commandTimeout: 50`, all up, then the server
 *      with --pause-pid SIGSTOPped (SIGCONT afterwards, and on any exit).
 *
 * Run by bench/compare.sh with NODE_PATH pointing at a temporary
 * node_modules holding redlock@4.2.0 and ioredis. Only 127.0.0.1.
 *
 * usage: node node-redlock-bench.js --uris redis://127.0.0.1:P1,... \
 *          [--iterations N] [--iterations-paused N] [--warmup N] [--warmup-paused N] \
 *          [--scenario 1,5] [--pause-pid PID] [--json [--samples]]
 */
'use strict';

const Redlock = require('redlock');
const Redis = require('ioredis');
const crypto = require('crypto');

const LEASE_MS = 10000;

function parseArgs(argv) {
	const o = { uris: [], iterations: 20000, iterationsPaused: 300, warmup: 2000,
		warmupPaused: 20,
		scenarios: new Set([1, 5]), pausePid: 0, json: false, samples: false };
	for (let i = 2; i < argv.length; i++) {
		const a = argv[i], v = () => {
			if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
			return argv[++i];
		};
		switch (a) {
		case '--uris': o.uris.push(...v().split(/[ ,]+/).filter(Boolean)); break;
		case '--iterations': o.iterations = parseInt(v(), 10); break;
		case '--iterations-paused': o.iterationsPaused = parseInt(v(), 10); break;
		case '--warmup': o.warmup = parseInt(v(), 10); break;
		case '--warmup-paused': o.warmupPaused = parseInt(v(), 10); break;
		case '--scenario': o.scenarios = new Set(v().split(',').map(Number)); break;
		case '--pause-pid': o.pausePid = parseInt(v(), 10); break;
		case '--json': o.json = true; break;
		case '--samples': o.samples = true; break;
		default: throw new Error(`unknown argument ${a}`);
		}
	}
	if (o.uris.length === 0) throw new Error('--uris is required');
	for (const u of o.uris) {
		const m = /^redis:\/\/(127\.0\.0\.1|localhost):(\d+)\/?$/.exec(u);
		if (!m) throw new Error(`only redis://127.0.0.1:PORT is allowed (${u})`);
	}
	return o;
}

const opt = parseArgs(process.argv);
const say = (...a) => (opt.json ? console.error : console.log)(...a);
const runId = crypto.randomBytes(8).toString('hex');
let pausedPid = 0;

function resume() {
	if (pausedPid > 0) {
		try { process.kill(pausedPid, 'SIGCONT'); } catch (e) { /* gone */ }
		pausedPid = 0;
	}
}
process.on('exit', resume);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'])
	process.on(sig, () => { resume(); process.exit(130); });

function portOf(uri) {
	return parseInt(/:(\d+)\/?$/.exec(uri)[1], 10);
}

async function connect(uris, extra) {
	const clients = uris.map((u) => new Redis({ host: '127.0.0.1', port: portOf(u),
		lazyConnect: true, ...extra }));
	await Promise.all(clients.map((c) => c.connect()));
	return clients;
}

async function processId(client) {
	const info = await client.info('server');
	const m = /process_id:(\d+)/.exec(info);
	return m ? parseInt(m[1], 10) : -1;
}

function dist(ns) {
	const n = ns.length;
	if (n === 0) return { n: 0, p50: null, p99: null, mean: null, max: null };
	const s = BigInt64Array.from(ns).sort();
	let sum = 0;
	for (const x of s) sum += Number(x);
	const at = (p) => Number(s[Math.ceil(p * n) - 1]) / 1e3;
	return { n, p50: at(0.5), p99: at(0.99), mean: sum / n / 1e3, max: Number(s[n - 1]) / 1e3 };
}

/* The redis-servers' CPU (INFO cpu: used_cpu_user + used_cpu_sys), summed, µs. */
async function serverCpuUs(clients) {
	let total = 0;
	for (const c of clients) {
		const info = await c.info('cpu');
		for (const k of ['used_cpu_sys', 'used_cpu_user']) {
			const m = new RegExp(`^${k}:([0-9.]+)`, 'm').exec(info);
			if (m) total += parseFloat(m[1]) * 1e6;
		}
	}
	return total;
}

async function runPairs(redlock, resource, warm, iters, statClients) {
	let errors = 0, firstErr = null;
	const pair = [], acq = [], rel = [];
	const one = async () => {
		const t0 = process.hrtime.bigint();
		const lock = await redlock.lock(resource, LEASE_MS);
		const ta = process.hrtime.bigint();
		await lock.unlock();
		return [t0, ta, process.hrtime.bigint()];
	};
	for (let i = 0; i < warm; i++) {
		try { await one(); } catch (e) { errors++; }
	}
	if (errors) say(`  (warm-up: ${errors} errors)`);
	errors = 0;
	const s0 = statClients ? await serverCpuUs(statClients) : null;
	const c0 = process.cpuUsage();
	const w0 = process.hrtime.bigint();
	for (let i = 0; i < iters; i++) {
		try {
			const [t0, ta, t1] = await one();
			pair.push(t1 - t0);
			acq.push(ta - t0);
			rel.push(t1 - ta);
		} catch (e) {
			errors++;
			if (!firstErr) firstErr = e;
		}
	}
	const w1 = process.hrtime.bigint();
	const c = process.cpuUsage(c0);
	const s1 = statClients ? await serverCpuUs(statClients) : null;
	if (firstErr) say(`  first error: ${firstErr.message}`);
	const cpuTotal = c.user + c.system;
	return { pair: dist(pair), acq: dist(acq), rel: dist(rel), errors, iters,
		wall_s: Number(w1 - w0) / 1e9, cpu_us_total: cpuTotal,
		server_cpu_us_total: statClients ? s1 - s0 : null,
		pair_ns: opt.samples ? pair.map(Number) : null,
		ops_per_s: iters / (Number(w1 - w0) / 1e9),
		cpu_us_per_op: (c.user + c.system) / iters,
		server_cpu_us_per_op: statClients ? (s1 - s0) / iters : null };
}

const results = [];

function record(scenario, servers, paused, r, note) {
	const row = { scenario, impl: 'node-redlock', what: 'lock+unlock', servers, paused,
		threads: 1, samples: r.pair.n, errors: r.errors };
	for (const [k, d] of [['', r.pair], ['acquire_', r.acq], ['release_', r.rel]]) {
		row[`${k}p50_us`] = d.p50;
		row[`${k}p99_us`] = d.p99;
		row[`${k}mean_us`] = d.mean;
		row[`${k}max_us`] = d.max;
	}
	row.ops_per_s = r.ops_per_s;
	row.cpu_us_per_op = r.cpu_us_per_op;
	row.server_cpu_us_per_op = r.server_cpu_us_per_op;
	row.iters = r.iters;
	row.wall_s = r.wall_s;
	row.cpu_us_total = r.cpu_us_total;
	row.server_cpu_us_total = r.server_cpu_us_total;
	if (r.pair_ns) row.pair_ns = r.pair_ns;
	row.note = note;
	results.push(row);
	const f = (x) => (x === null ? 'n/a' : x.toFixed(1));
	say(`  node-redlock n=${servers}${paused ? '(1 paused)' : ''}  p50 ${f(r.pair.p50)}  ` +
		`p99 ${f(r.pair.p99)}  mean ${f(r.pair.mean)}  max ${f(r.pair.max)} us  ` +
		`${r.ops_per_s.toFixed(0)} ops/s  cpu ${r.cpu_us_per_op.toFixed(1)} us/op  ` +
		(r.server_cpu_us_per_op !== null ? `server cpu ${r.server_cpu_us_per_op.toFixed(1)} us/op  ` : '') +
		`[acq p50 ${f(r.acq.p50)} p99 ${f(r.acq.p99)} | rel p50 ${f(r.rel.p50)} ` +
		`p99 ${f(r.rel.p99)}]${r.errors ? `  errors=${r.errors}` : ''}  (${note})`);
}

function newRedlock(clients) {
	const rl = new Redlock(clients, { driftFactor: 0.01, retryCount: 0, retryDelay: 200,
		retryJitter: 200 });
	rl.on('clientError', () => { /* counted through the votes */ });
	return rl;
}

async function scenario1() {
	say(`scenario 1: node-redlock uncontended lock+unlock, ${opt.iterations} iterations, ` +
		`${opt.warmup} warm-up`);
	for (const n of [1, 3, 5]) {
		if (n > opt.uris.length) {
			say(`  skipped: ${n} servers (only ${opt.uris.length})`);
			continue;
		}
		const clients = await connect(opt.uris.slice(0, n), {});
		/* Server CPU is read on other connections, outside the timed pairs. */
		const stat = await connect(opt.uris.slice(0, n), {});
		const rl = newRedlock(clients);
		const r = await runPairs(rl, `node-redlock-bench:${runId}:s1-n${n}`, opt.warmup,
			opt.iterations, stat);
		stat.forEach((c) => c.disconnect());
		record(1, n, 0, r, 'retryCount 0, driftFactor 0.01');
		await Promise.all(clients.map((c) => c.quit()));
	}
}

async function scenario5() {
	if (opt.uris.length < 5 || !opt.pausePid) {
		say('scenario 5: skipped (needs 5 servers and --pause-pid)');
		return;
	}
	const warm = opt.warmupPaused;
	say(`scenario 5: node-redlock on 5 servers, ioredis commandTimeout 50 ms, pid ` +
		`${opt.pausePid} paused; ${opt.iterationsPaused} iterations, ${warm} warm-up`);
	for (const phase of [0, 1]) {
		const clients = await connect(opt.uris.slice(0, 5), { commandTimeout: 50 });
		const pids = await Promise.all(clients.map(processId));
		if (!pids.includes(opt.pausePid))
			throw new Error(`--pause-pid ${opt.pausePid} is none of the servers (${pids})`);
		const rl = newRedlock(clients);
		const resource = `node-redlock-bench:${runId}:s5-${phase ? 'paused' : 'up'}`;
		for (let i = 0; i < 3; i++) {
			const l = await rl.lock(resource, LEASE_MS);
			await l.unlock();
		}
		let r;
		if (phase) {
			process.kill(opt.pausePid, 'SIGSTOP');
			pausedPid = opt.pausePid;
			await new Promise((res) => setTimeout(res, 100));
		}
		try {
			r = await runPairs(rl, resource, warm, opt.iterationsPaused);
		} finally {
			resume();
		}
		record(5, 5, phase, r, 'ioredis commandTimeout 50');
		/* The resumed server answers what queued up; then leave. */
		await new Promise((res) => setTimeout(res, phase ? 500 : 0));
		clients.forEach((c) => c.disconnect());
	}
}

(async () => {
	const ver = (m) => { try { return require(`${m}/package.json`).version; } catch (e) { return '?'; } };
	say(`node-redlock-bench: redlock ${ver('redlock')}, ioredis ${ver('ioredis')}, ` +
		`node ${process.version}, run ${runId}`);
	if (opt.scenarios.has(1)) await scenario1();
	if (opt.scenarios.has(5)) await scenario5();
	if (opt.json) {
		process.stdout.write(JSON.stringify({ tool: 'node-redlock-bench',
			redlock_version: ver('redlock'), ioredis_version: ver('ioredis'),
			node_version: process.version, date: new Date().toISOString(),
			iterations: opt.iterations, iterations_paused: opt.iterationsPaused,
			warmup: opt.warmup, warmup_paused: opt.warmupPaused, results }, null, 2) + '\n');
	}
	process.exit(0);
})().catch((e) => {
	console.error(`node-redlock-bench: ${e.stack || e}`);
	resume();
	process.exit(1);
});
