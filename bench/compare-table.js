#!/usr/bin/env node
// SPDX-License-Identifier: BSD-3-Clause
/*
 * compare-table.js - the markdown report of bench/compare.sh.
 *
 * usage: node compare-table.js FILE.json...   (dlock-bench, node-redlock-bench.js,
 * redisson-bench and redsync-bench --json outputs, contend.js outputs;
 * machine facts come from CMP_* environment variables set by compare.sh)
 *
 * Rows of the same (impl, scenario, servers, paused, what) from several files
 * (compare.sh's rounds) are merged: their pair_ns samples are pooled before
 * taking percentiles, operations, wall time and CPU are summed.
 */
'use strict';

const fs = require('fs');

const docs = process.argv.slice(2).map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
const e = process.env;
const nodeDoc = docs.find((d) => d.tool === 'node-redlock-bench') || {};
const dl = docs.find((d) => d.tool === 'dlock-bench') || {};

/* Contended rows differ by their waiters too (8, 64, 512). */
const keyOf = (r) => [r.impl, r.scenario, r.servers, r.paused, r.what]
	.concat(r.waiters ? [r.waiters] : []).join('|');
const groups = new Map();
for (const d of docs)
	for (const r of d.results) {
		const k = keyOf(r);
		if (!groups.has(k)) groups.set(k, []);
		groups.get(k).push(r);
	}

const sum = (rs, k) => (rs.every((r) => typeof r[k] === 'number')
	? rs.reduce((a, r) => a + r[k], 0) : null);

function merge(rs) {
	if (rs.length === 1 && !rs[0].pair_ns) return { ...rs[0], rounds: [rs[0]] };
	const m = { ...rs[0], rounds: rs };
	const all = rs.flatMap((r) => r.pair_ns || []);
	if (all.length > 0) {
		const s = Float64Array.from(all).sort();
		const at = (p) => s[Math.ceil(p * s.length) - 1] / 1e3;
		m.p50_us = at(0.5);
		m.p99_us = at(0.99);
		m.max_us = s[s.length - 1] / 1e3;
		m.mean_us = s.reduce((a, x) => a + x, 0) / s.length / 1e3;
		m.samples = s.length;
	}
	const iters = sum(rs, 'iters'), wall = sum(rs, 'wall_s');
	const cpu = sum(rs, 'cpu_us_total'), scpu = sum(rs, 'server_cpu_us_total');
	m.errors = sum(rs, 'errors');
	if (iters && wall) m.ops_per_s = iters / wall;
	if (iters && cpu !== null) m.cpu_us_per_op = cpu / iters;
	m.server_cpu_us_per_op = iters && scpu !== null ? scpu / iters : null;
	delete m.pair_ns;
	return m;
}

const rows = new Map([...groups].map(([k, rs]) => [k, merge(rs)]));
const pick = (impl, scenario, servers, paused, what = 'lock+unlock', waiters = null) =>
	rows.get([impl, scenario, servers, paused, what].concat(waiters ? [waiters] : []).join('|'));
const f = (x, d = 1) => (x === null || x === undefined || Number.isNaN(x) ? 'n/a' : x.toFixed(d));
const ratio = (a, b) => (a == null || b == null || !b ? null : a / b);

const rsDoc = docs.find((d) => d.tool === 'redsync-bench') || {};
const rjDoc = docs.find((d) => d.tool === 'redisson-bench') || {};
const PEERS = ['floor', 'redisson', 'redsync', 'node-redlock'];

console.log(`### dlock vs its floor, Redisson, go-redsync and node-redlock: ${e.CMP_DATE || ''}\n`);
console.log(`Machine: ${e.CMP_NPROC} CPUs, ${e.CMP_CPU}; load average ${e.CMP_LOAD_BEFORE || '?'} ` +
	`before, ${e.CMP_LOAD_AFTER || '?'} after; redis ${e.CMP_REDIS}; dlock ${dl.dlock_version} ` +
	`(git ${e.CMP_GIT}); Redisson ${rjDoc.redisson_version} on Java ${rjDoc.java_version}; ` +
	`redsync ${rsDoc.redsync_version}, go-redis ${rsDoc.goredis_version}, ${rsDoc.go_version}; ` +
	`node ${nodeDoc.node_version}, redlock ${nodeDoc.redlock_version}, ioredis ${nodeDoc.ioredis_version}.`);
console.log(`Iterations: ${e.CMP_ITER} per row in ${e.CMP_ROUNDS} rounds of ${e.CMP_PER_ROUND} ` +
	'in which the four clients take turns (the order rotates every round; dlock and floor ' +
	`also alternate every 500 pairs within a round), warm-up ${e.CMP_WARMUP} per round, ` +
	`Redisson ${e.CMP_JVM_WARMUP} per row and round (a fresh JVM each round); paused row: ` +
	`${e.CMP_ITER_PAUSED}, one run. Latencies in µs per lock+unlock pair (nearest rank); ` +
	'client CPU = the process\'s own user+sys µs per pair (a JVM\'s all threads: netty, GC, ' +
	'JIT); server CPU = the redis-servers\' INFO cpu µs per pair, summed over the row\'s ' +
	`servers; floor latch DEL: ${dl.floor_latch_del}. dlock÷ = dlock's figure over the row's. ` +
	'"dlock (blocking)": dlock_lock_acquire/dlock_redlock_acquire + release from one thread; "dlock async": ' +
	'the same pairs through the asynchronous calls, one pair in flight at a time on a dlock_loop ' +
	'the bench thread drives (as node-redlock\'s promises on its event loop); its own ratios ' +
	'to node-redlock follow the table.\n');

console.log('| scenario | implementation | p50 | p99 | ops/s | client CPU/op | server CPU/op | ' +
	'dlock÷ p50 | dlock÷ p99 | dlock÷ client CPU |');
console.log('|---|---|' + '---:|'.repeat(8));
const lines = [
	['1 server', 1, 1, 2, 1, 0],
	['3 servers', 1, 3, 2, 3, 0],
	['5 servers', 1, 5, 2, 5, 0],
	['5, 1 paused (cmd timeout 50 ms)', 5, 5, 5, 5, 1],
];
const peerRow = (impl, sd, n, sf, nf, paused) => (impl === 'floor' ? pick('floor', sf, nf, paused)
	: pick(impl, sd, n, paused));
const summary = {};
for (const [label, sd, n, sf, nf, paused] of lines) {
	const d = pick('dlock', sd, n, paused);
	if (!d) continue;
	const r = {};
	const out = (impl, x) => {
		const rp50 = ratio(d.p50_us, x.p50_us), rp99 = ratio(d.p99_us, x.p99_us);
		const rcpu = ratio(d.cpu_us_per_op, x.cpu_us_per_op);
		r[impl] = { p50: rp50, p99: rp99, cpu: rcpu };
		const dash = impl === 'dlock' || impl === 'dlock-async';
		const shown = { dlock: 'dlock (blocking)', 'dlock-async': 'dlock async' }[impl] || impl;
		console.log(`| ${label} | ${shown} | ${f(x.p50_us)} | ${f(x.p99_us)} | ${f(x.ops_per_s, 0)} | ` +
			`${f(x.cpu_us_per_op)} | ${f(x.server_cpu_us_per_op)} | ${dash ? '' : f(rp50, 2)} | ` +
			`${dash ? '' : f(rp99, 2)} | ${dash ? '' : f(rcpu, 2)} |`);
	};
	out('dlock', d);
	const da = pick('dlock-async', sd, n, paused);
	if (da) out('dlock-async', da);
	for (const impl of PEERS) {
		const x = peerRow(impl, sd, n, sf, nf, paused);
		if (x) out(impl, x);
	}
	const wd = n === 1 && !paused && pick('redisson', 1, 1, 0, 'lock+unlock watchdog');
	if (wd) out('redisson, watchdog (no lease)', wd);
	const rs = peerRow('redsync', sd, n, sf, nf, paused), nr = peerRow('node-redlock', sd, n, sf, nf, paused);
	summary[label] = { df: r.floor && r.floor.p50, dn50: r['node-redlock'] && r['node-redlock'].p50,
		dn99: r['node-redlock'] && r['node-redlock'].p99, dncpu: r['node-redlock'] && r['node-redlock'].cpu,
		drs50: r.redsync && r.redsync.p50,
		drsScpu: rs && ratio(d.server_cpu_us_per_op, rs.server_cpu_us_per_op),
		dnScpu: nr && ratio(d.server_cpu_us_per_op, nr.server_cpu_us_per_op),
		/* dlock async over node-redlock: both one pair at a time on an event loop. */
		an50: da && nr && ratio(da.p50_us, nr.p50_us), an99: da && nr && ratio(da.p99_us, nr.p99_us),
		ancpu: da && nr && ratio(da.cpu_us_per_op, nr.cpu_us_per_op),
		af: da && r.floor && ratio(da.p50_us, peerRow('floor', sd, n, sf, nf, paused).p50_us) };
}

const asyncLines = lines.filter(([label]) => summary[label] && summary[label].an50 != null);
if (asyncLines.length) {
	console.log('\ndlock async over node-redlock (both one pair in flight on an event loop; ' +
		'dlock async over its floor beside):\n');
	console.log('| scenario | p50 | p99 | client CPU/op | p50 over the floor |');
	console.log('|---|---:|---:|---:|---:|');
	for (const [label] of asyncLines) {
		const s = summary[label];
		console.log(`| ${label} | ${f(s.an50, 2)} | ${f(s.an99, 2)} | ${f(s.ancpu, 2)} | ` +
			`${f(s.af, 2)} |`);
	}
}

const IMPLS = ['dlock', 'redisson', 'redsync', 'node-redlock'];
const contRows = docs.filter((d) => d.tool === 'contend').flatMap((d) => d.results);
const waiterCounts = [...new Set(contRows.map((r) => r.waiters || r.procs))].sort((a, b) => a - b);
const cont = waiterCounts.flatMap((w) => IMPLS.map((i) => pick(i, 6, 1, 0, 'contended', w)))
	.filter(Boolean);
if (cont.length) {
	const c0 = cont[0];
	console.log(`\nContended (${waiterCounts.join(', ')} waiters on one lock, 1 server, ` +
		`${c0.window_s.toFixed(1)} s each after ${e.CMP_CONTEND_WARM || '?'} s unrecorded; every ` +
		`waiter loops lock → hold ${c0.hold_us} µs spinning → unlock → sleep ${c0.think_us} µs). ` +
		'dlock and redsync run one process per waiter; node-redlock runs several async waiters ' +
		'per process, each with its own connection, and Redisson several threads per JVM on one ' +
		'RedissonClient, when the waiters outnumber the processes the machine can hold ' +
		`(${e.CMP_CONTEND_SPREAD || 'see compare.sh'}): "processes × waiters" says how. A ` +
		'hand-off is an acquisition by another waiter than the last holder; wait = from the ' +
		'last holder\'s unlock call returning (or, in brackets, starting) to the next holder\'s ' +
		'lock call returning, all on CLOCK_MONOTONIC; re-acquired = share of acquisitions by the ' +
		'waiter that had just unlocked; CPU per acquisition, all the processes\' and the ' +
		'server\'s; starved = waiters that never got the lock in the window (for dlock, a lost ' +
		'wake-up unless the rate explains it; the peers\' locks are not queues):\n');
	console.log('| waiters | implementation | waits by | processes × waiters | hand-offs/s | ' +
		'acquisitions/s | re-acquired | wait p50 | wait p99 | (from unlock call) p50 | p99 | ' +
		'client CPU/acq | server CPU/acq | acquisitions per waiter min–median–max | starved | ' +
		'failed lock calls | overlaps |');
	console.log('|---:|---|---|---|' + '---:|'.repeat(13));
	const how = { dlock: 'pub/sub', redisson: 'pub/sub', redsync: 'polling (defaults)',
		'node-redlock': 'polling (defaults)' };
	for (const c of cont) {
		const w = c.waiters || c.procs;
		const spread = `${c.procs} × ${c.waiters_per_proc || 1}` +
			(w % c.procs ? ` (${w % c.procs} with one more)` : '');
		const perW = c.per_waiter_min !== undefined
			? `${c.per_waiter_min}–${c.per_waiter_p50}–${c.per_waiter_max}`
			: `${Math.min(...c.per_process)}–${Math.max(...c.per_process)}`;
		console.log(`| ${w} | ${c.impl} | ${how[c.impl]} | ${spread} | ${f(c.handoffs_per_s, 0)} | ` +
			`${f(c.acquisitions_per_s, 0)} | ${f(100 * c.reacquire_share, 0)} % | ${f(c.wait_p50_us)} | ` +
			`${f(c.wait_p99_us)} | ${f(c.wait_call_p50_us)} | ${f(c.wait_call_p99_us)} | ` +
			`${f(c.cpu_us_per_op)} | ${f(c.server_cpu_us_per_op)} | ${perW} | ` +
			`${c.starved === undefined ? 'n/a' : c.starved} | ${c.failed_lock_calls} | ${c.overlaps} |`);
	}
	const lo = waiterCounts[0], hi = waiterCounts[waiterCounts.length - 1];
	if (hi > lo) {
		console.log(`\nServer CPU per acquisition by waiters (µs), and ${hi}÷${lo}:\n`);
		console.log('| implementation | ' + waiterCounts.map((w) => `${w} waiters`).join(' | ') +
			` | ${hi}÷${lo} |`);
		console.log('|---|' + '---:|'.repeat(waiterCounts.length + 1));
		for (const i of IMPLS) {
			const by = waiterCounts.map((w) => pick(i, 6, 1, 0, 'contended', w));
			if (!by.some(Boolean)) continue;
			const s = (x) => (x ? x.server_cpu_us_per_op : null);
			console.log(`| ${i} | ` + by.map((x) => f(s(x))).join(' | ') +
				` | ${f(ratio(s(by[by.length - 1]), s(by[0])), 2)} |`);
		}
	}
}

const crashes = docs.filter((d) => d.tool === 'dlock-herd' || d.tool === 'crash')
	.flatMap((d) => d.results).filter((r) => r.what === 'crash')
	.sort((a, b) => IMPLS.indexOf(a.impl) - IMPLS.indexOf(b.impl));
const crash = crashes.find((r) => r.impl === 'dlock');
if (crashes.length) {
	const c0 = crashes[0];
	console.log(`\nHolder SIGKILLed: a holder takes the lock with a ${c0.ttl_ms} ms lease and is ` +
		`SIGKILLed while ${c0.waiters} waiters wait on it (spread as in the contended case), 1 ` +
		'server; dlock by bench/dlock-herd --crash, the peers by bench/crash.js with their ' +
		'contended-case workers. Next holder = from the dead holder\'s lock call returning to ' +
		'the first waiter\'s, and that minus the lease (after the key\'s expiry); acquire ' +
		'attempts = the acquire commands on the lock the server ran (MONITOR\'s timestamps, ' +
		'from the holder\'s acquire + the lease): dlock\'s and Redisson\'s lock scripts, ' +
		'node-redlock\'s lock script, redsync\'s SET NX:\n');
	console.log('| implementation | processes × waiters | next holder, ms | after the expiry, ms | ' +
		'attempts in the first ms | busiest ms of the first 50 | first 10 ms | all | ' +
		'all per waiter |');
	console.log('|---|---|' + '---:|'.repeat(7));
	for (const c of crashes)
		console.log(`| ${c.impl} | ${c.procs || c.waiters} × ${c.waiters_per_proc || 1} | ` +
			`${f(c.next_holder_after_acquire_ms)} | ${f(c.next_holder_after_expiry_ms)} | ` +
			`${c.acquires_first_ms} | ${c.busiest_ms} | ${c.acquires_first_10ms} | ` +
			`${c.acquires_total} | ${f(c.acquires_total / c.waiters, 2)} |`);
}

console.log('\nPer round (dlock\'s p50 over each peer\'s, each round on its own; the spread ' +
	'is the noise):\n');
console.log('| servers | ' + PEERS.map((p) => `dlock÷${p} p50 by round`).join(' | ') + ' |');
console.log('|---|' + '---|'.repeat(PEERS.length));
for (const [label, sd, n, sf, nf] of lines.slice(0, 3)) {
	const d = pick('dlock', sd, n, 0);
	if (!d) continue;
	const by = (o) => (o ? o.rounds.map((x) => x.p50_us) : []);
	const list = (a, b) => a.map((x, i) => f(ratio(x, b[i]), 2)).join(', ');
	console.log(`| ${label} | ` + PEERS.map((p) => list(by(d), by(peerRow(p, sd, n, sf, nf, 0))))
		.join(' | ') + ' |');
}

console.log('\nScenario 5 detail (5 servers, command timeout 50 ms; acquire = the lock call ' +
	'alone, release = the unlock call alone, µs):\n');
console.log('| impl | servers up | acquire p50 | acquire p99 | release p50 | release p99 | ' +
	'pair p50 | pair p99 | pair max | errors |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const impl of ['dlock', 'floor', 'node-redlock'])
	for (const paused of [0, 1]) {
		const r = pick(impl, 5, 5, paused);
		if (!r) continue;
		console.log(`| ${impl} | ${paused ? '4 of 5 (1 SIGSTOPped)' : 'all 5'} | ` +
			`${f(r.acquire_p50_us)} | ${f(r.acquire_p99_us)} | ${f(r.release_p50_us)} | ` +
			`${f(r.release_p99_us)} | ${f(r.p50_us)} | ${f(r.p99_us)} | ${f(r.max_us)} | ${r.errors} |`);
	}

const ho = pick('dlock', 4, 1, 0, 'handoff');
if (ho) {
	console.log(`\nHand-off (scenario 4, 4 threads on one lock, 1 server): p50 ${f(ho.p50_us)} µs = ` +
		`${f(ho.p50_rt, 2)} RT, p99 ${f(ho.p99_us)} µs = ${f(ho.p99_rt, 2)} RT, where RT = ` +
		`${f(ho.rt_us)} µs, the floor's EVALSHA round trip p50 measured between the hand-off ` +
		'chunks.');
	const fl1 = pick('floor', 2, 1, 0);
	if (fl1) {
		const rts = fl1.rounds.map((r) => r.acquire_p50_us).sort((a, b) => a - b);
		const med = rts[Math.floor((rts.length - 1) / 2)];
		console.log(`(Against scenario 2's floor acquire p50 instead, ${f(med)} µs, the median of ` +
			`its rounds [${rts.map((x) => f(x)).join(', ')}]: p50 ${f(ho.p50_us / med, 2)} RT.)`);
	}
}

const check = (name, v, max, d = 2) =>
	console.log(`- ${name}: ${f(v, d)} (target ≤ ${max}) ${v != null && v <= max ? 'met' : 'NOT met'}`);
const s1 = summary['1 server'] || {}, s5 = summary['5 servers'] || {};
console.log('\nTargets (SPEC §9):\n');
check('dlock/floor p50, 1 server', s1.df, 1.15);
check('dlock/floor p50, 5 servers', s5.df, 1.2);
check('dlock (blocking)/node-redlock p50, 5 servers', s5.dn50, 0.85);
check('dlock async/node-redlock p50, 5 servers', s5.an50, 0.85);
check('dlock (blocking)/node-redlock p99, 5 servers', s5.dn99, 0.5);
check('dlock async/node-redlock p99, 5 servers', s5.an99, 0.5);
check('dlock (blocking)/node-redlock CPU per op, 5 servers', s5.dncpu, 0.4);
check('dlock async/node-redlock CPU per op, 5 servers', s5.ancpu, 0.4);
if (ho) check('hand-off p50, round trips', ho.p50_rt, 3);

console.log('\nTargets (the thundering herd; ratios are dlock\'s figure over the peer\'s):\n');
check('dlock/redsync p50, 1 server', s1.drs50, 1);
check('dlock/redsync server CPU per pair, 1 server', s1.drsScpu, 1.1);
check('dlock (blocking)/node-redlock p50, 5 servers', s5.dn50, 0.8);
check('dlock async/node-redlock p50, 5 servers', s5.an50, 0.8);
check('dlock/node-redlock server CPU per pair, 5 servers', s5.dnScpu, 1);
const dc = waiterCounts.map((w) => pick('dlock', 6, 1, 0, 'contended', w)).filter(Boolean);
if (dc.length > 1) {
	const a = dc[0], b = dc[dc.length - 1];
	check(`dlock server CPU per acquisition, ${b.waiters} over ${a.waiters} waiters`,
		ratio(b.server_cpu_us_per_op, a.server_cpu_us_per_op), 2);
}
if (dc.length) {
	const starved = dc.reduce((t, c) => t + (c.starved || 0), 0);
	/* A waiter stuck for good fails the run (contend.js): this is the
	 * subtler one, never served while the others were; beside it the
	 * acquisitions per waiter that the rate gave on average. */
	console.log(`- dlock waiters that never got the lock in a contended window (` +
		dc.map((c) => `${c.starved} of ${c.waiters}, ${f(c.acquisitions / c.waiters)} ` +
			'acquisitions per waiter on average').join('; ') +
		`): ${starved} (target 0, no lost wake-up) ${starved === 0 ? 'met' : 'NOT met'}`);
}
if (crash) {
	check(`dlock holder SIGKILLed, ${crash.waiters} waiters: ms from its acquire to the next ` +
		`holder (TTL ${crash.ttl_ms} ms + 50)`, crash.next_holder_after_acquire_ms, crash.ttl_ms + 50, 1);
	check(`dlock holder SIGKILLed, ${crash.waiters} waiters: acquire scripts in the first ms after ` +
		'the expiry', crash.acquires_first_ms, 4, 0);
}
