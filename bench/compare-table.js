#!/usr/bin/env node
// SPDX-License-Identifier: BSD-3-Clause
/*
 * compare-table.js - the markdown report of bench/compare.sh.
 *
 * usage: node compare-table.js FILE.json...   (dlock-bench --json and
 * node-redlock-bench.js --json outputs; machine facts come from CMP_*
 * environment variables set by compare.sh)
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

const keyOf = (r) => [r.impl, r.scenario, r.servers, r.paused, r.what].join('|');
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
const pick = (impl, scenario, servers, paused, what = 'lock+unlock') =>
	rows.get([impl, scenario, servers, paused, what].join('|'));
const f = (x, d = 1) => (x === null || x === undefined || Number.isNaN(x) ? 'n/a' : x.toFixed(d));
const ratio = (a, b) => (a == null || b == null || !b ? null : a / b);

console.log(`### dlock vs floor vs node-redlock: ${e.CMP_DATE || ''}\n`);
console.log(`Machine: ${e.CMP_NPROC} CPUs, ${e.CMP_CPU}; redis ${e.CMP_REDIS}; ` +
	`node ${nodeDoc.node_version}, redlock ${nodeDoc.redlock_version}, ` +
	`ioredis ${nodeDoc.ioredis_version}; dlock ${dl.dlock_version} (git ${e.CMP_GIT}).`);
console.log(`Iterations: ${e.CMP_ITER} per row in ${e.CMP_ROUNDS} alternating rounds of ` +
	`${e.CMP_PER_ROUND} (dlock and floor also alternate every 500 pairs within a round), ` +
	`warm-up ${e.CMP_WARMUP} per round; paused row: ${e.CMP_ITER_PAUSED}, one run. ` +
	`Latencies in µs per lock+unlock pair; CPU = client user+sys µs per pair; ` +
	`floor latch DEL: ${dl.floor_latch_del}.\n`);

console.log('| scenario | dlock p50 | dlock p99 | dlock ops/s | dlock CPU | floor p50 | floor p99 | ' +
	'floor CPU | node-redlock p50 | node-redlock p99 | node-redlock CPU | dlock/floor p50 | ' +
	'dlock/node p50 | dlock/node p99 | dlock/node CPU |');
console.log('|---|' + '---:|'.repeat(14));
const lines = [
	['1 server', 1, 1, 2, 1, 0],
	['3 servers', 1, 3, 2, 3, 0],
	['5 servers', 1, 5, 2, 5, 0],
	['5, 1 paused (cmd timeout 50 ms)', 5, 5, 5, 5, 1],
];
const summary = {};
for (const [label, sd, n, sf, nf, paused] of lines) {
	const d = pick('dlock', sd, n, paused), fl = pick('floor', sf, nf, paused);
	const nr = pick('node-redlock', sd, n, paused);
	if (!d) continue;
	const r = {
		df: ratio(d.p50_us, fl && fl.p50_us), dn50: ratio(d.p50_us, nr && nr.p50_us),
		dn99: ratio(d.p99_us, nr && nr.p99_us), dncpu: ratio(d.cpu_us_per_op, nr && nr.cpu_us_per_op),
	};
	summary[label] = r;
	console.log(`| ${label} | ${f(d.p50_us)} | ${f(d.p99_us)} | ${f(d.ops_per_s, 0)} | ` +
		`${f(d.cpu_us_per_op)} | ${f(fl && fl.p50_us)} | ${f(fl && fl.p99_us)} | ` +
		`${f(fl && fl.cpu_us_per_op)} | ${f(nr && nr.p50_us)} | ${f(nr && nr.p99_us)} | ` +
		`${f(nr && nr.cpu_us_per_op)} | ${f(r.df, 2)} | ${f(r.dn50, 2)} | ${f(r.dn99, 2)} | ` +
		`${f(r.dncpu, 2)} |`);
}

console.log('\nPer round (p50 ratios of each round on its own; the spread is the noise):\n');
console.log('| servers | dlock/floor p50 by round | dlock/node-redlock p50 by round |');
console.log('|---|---|---|');
for (const [label, sd, n, sf, nf] of lines.slice(0, 3)) {
	const d = pick('dlock', sd, n, 0), fl = pick('floor', sf, nf, 0), nr = pick('node-redlock', sd, n, 0);
	if (!d) continue;
	const by = (o) => (o ? o.rounds.map((r) => r.p50_us) : []);
	const dr = by(d), fr = by(fl), nrr = by(nr);
	const list = (a, b) => a.map((x, i) => f(ratio(x, b[i]), 2)).join(', ');
	console.log(`| ${label} | ${list(dr, fr)} | ${list(dr, nrr)} |`);
}

console.log('\nWhere the CPU goes (µs per lock+unlock pair; server = the redis-servers\' own ' +
	'CPU, INFO cpu used_cpu_user+sys, summed over the servers of the row):\n');
console.log('| scenario | dlock client | dlock server | floor client | floor server | ' +
	'node-redlock client | node-redlock server |');
console.log('|---|---:|---:|---:|---:|---:|---:|');
for (const [label, sd, n, sf, nf, paused] of lines.slice(0, 3)) {
	const d = pick('dlock', sd, n, paused), fl = pick('floor', sf, nf, paused);
	const nr = pick('node-redlock', sd, n, paused);
	if (!d) continue;
	console.log(`| ${label} | ${f(d.cpu_us_per_op)} | ${f(d.server_cpu_us_per_op)} | ` +
		`${f(fl && fl.cpu_us_per_op)} | ${f(fl && fl.server_cpu_us_per_op)} | ` +
		`${f(nr && nr.cpu_us_per_op)} | ${f(nr && nr.server_cpu_us_per_op)} |`);
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

const check = (name, v, max) =>
	console.log(`- ${name}: ${f(v, 2)} (target ≤ ${max}) ${v != null && v <= max ? 'met' : 'NOT met'}`);
const s1 = summary['1 server'] || {}, s5 = summary['5 servers'] || {};
console.log('\nTargets (SPEC §9):\n');
check('dlock/floor p50, 1 server', s1.df, 1.15);
check('dlock/floor p50, 5 servers', s5.df, 1.2);
check('dlock/node-redlock p50, 5 servers', s5.dn50, 0.85);
check('dlock/node-redlock p99, 5 servers', s5.dn99, 0.5);
check('dlock/node-redlock CPU per op, 5 servers', s5.dncpu, 0.4);
if (ho) check('hand-off p50, round trips', ho.p50_rt, 3);
