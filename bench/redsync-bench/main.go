// SPDX-License-Identifier: BSD-3-Clause

// redsync-bench - the go-redsync peer of dlock-bench (SPEC §9): redsync v4
// with go-redis v9 on the same local servers, measured the same way as
// dlock-bench and node-redlock-bench.js: per lock+unlock pair, CLOCK_MONOTONIC
// latencies (nearest-rank p50/p99, µs), getrusage(RUSAGE_SELF) user+sys per
// pair, and the servers' INFO cpu per pair.
//
//	1  uncontended mutex.Lock() then mutex.Unlock() on the first 1, 3 and 5
//	   servers, one go-redis client (pool) per server, WithExpiry(10 s),
//	   WithTries(1); go-redis and redsync defaults otherwise.
//
// With -contend-worker it is one of the processes of the contended case
// instead (contend.go, driven by bench/contend.js).
//
// usage: redsync-bench -uris redis://127.0.0.1:P1,... [-iterations N]
//
//	[-warmup N] [-json] [-samples]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
)

const leaseMs = 10000

var (
	urisFlag   = flag.String("uris", "", "comma-separated redis://127.0.0.1:PORT")
	iterations = flag.Int("iterations", 20000, "measured pairs per row")
	warmup     = flag.Int("warmup", 2000, "warm-up pairs per row")
	asJSON     = flag.Bool("json", false, "JSON on stdout, the text on stderr")
	samples    = flag.Bool("samples", false, "raw pair latencies (ns) in the JSON")
	say        = func(f string, a ...any) { fmt.Printf(f, a...) }
)

// monoNs is CLOCK_MONOTONIC, the clock of the other benches (time.Now's
// monotonic reading is not exported, and contend.js compares across processes).
func monoNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func cpuUs() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec)*1e6 + float64(ru.Utime.Usec+ru.Stime.Usec)
}

var loopback = regexp.MustCompile(`^redis://(127\.0\.0\.1|localhost):(\d+)/?$`)

func addrOf(uri string) string {
	m := loopback.FindStringSubmatch(uri)
	if m == nil {
		fail("only redis://127.0.0.1:PORT is allowed (%s)", uri)
	}
	return "127.0.0.1:" + m[2]
}

func fail(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "redsync-bench: "+f+"\n", a...)
	os.Exit(1)
}

// serverCPUUs is the servers' own CPU (INFO cpu used_cpu_user+sys), summed, µs.
func serverCPUUs(clients []*redis.Client) float64 {
	total := 0.0
	re := regexp.MustCompile(`(?m)^used_cpu_(sys|user):([0-9.]+)`)
	for _, c := range clients {
		info, err := c.Info(context.Background(), "cpu").Result()
		if err != nil {
			fail("INFO cpu: %v", err)
		}
		for _, m := range re.FindAllStringSubmatch(info, -1) {
			v, _ := strconv.ParseFloat(m[2], 64)
			total += v * 1e6
		}
	}
	return total
}

type dist struct {
	n                   int
	p50, p99, mean, max float64
}

func distOf(ns []int64) dist {
	if len(ns) == 0 {
		return dist{}
	}
	s := append([]int64(nil), ns...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	sum := 0.0
	for _, x := range s {
		sum += float64(x)
	}
	at := func(p float64) float64 {
		i := int(math.Ceil(float64(len(s))*p)) - 1
		return float64(s[i]) / 1e3
	}
	return dist{len(s), at(0.5), at(0.99), sum / float64(len(s)) / 1e3, float64(s[len(s)-1]) / 1e3}
}

type row map[string]any

func putDist(r row, prefix string, d dist) {
	r[prefix+"p50_us"], r[prefix+"p99_us"] = d.p50, d.p99
	r[prefix+"mean_us"], r[prefix+"max_us"] = d.mean, d.max
}

// runPairs warms up, then measures iters lock+unlock pairs of m.
func runPairs(m *redsync.Mutex, warm, iters int, stat []*redis.Client) row {
	errors := 0
	var firstErr error
	one := func() (int64, int64, int64, error) {
		t0 := monoNs()
		if err := m.Lock(); err != nil {
			return 0, 0, 0, err
		}
		ta := monoNs()
		if ok, err := m.Unlock(); !ok || err != nil {
			return 0, 0, 0, fmt.Errorf("unlock: %v %v", ok, err)
		}
		return t0, ta, monoNs(), nil
	}
	for i := 0; i < warm; i++ {
		if _, _, _, err := one(); err != nil {
			errors++
		}
	}
	if errors > 0 {
		say("  (warm-up: %d errors)\n", errors)
	}
	errors = 0
	pair, acq, rel := make([]int64, 0, iters), make([]int64, 0, iters), make([]int64, 0, iters)
	runtime.GC() // the warm-up's garbage is not the measured loop's
	s0, c0, w0 := serverCPUUs(stat), cpuUs(), monoNs()
	for i := 0; i < iters; i++ {
		t0, ta, t1, err := one()
		if err != nil {
			errors++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		pair, acq, rel = append(pair, t1-t0), append(acq, ta-t0), append(rel, t1-ta)
	}
	w1, c1, s1 := monoNs(), cpuUs(), serverCPUUs(stat)
	if firstErr != nil {
		say("  first error: %v\n", firstErr)
	}
	wall := float64(w1-w0) / 1e9
	r := row{"samples": len(pair), "errors": errors, "iters": iters, "wall_s": wall,
		"cpu_us_total": c1 - c0, "server_cpu_us_total": s1 - s0,
		"ops_per_s": float64(iters) / wall, "cpu_us_per_op": (c1 - c0) / float64(iters),
		"server_cpu_us_per_op": (s1 - s0) / float64(iters)}
	pd := distOf(pair)
	putDist(r, "", pd)
	putDist(r, "acquire_", distOf(acq))
	putDist(r, "release_", distOf(rel))
	if *samples {
		r["pair_ns"] = pair
	}
	say("  redsync n=%d  p50 %.1f  p99 %.1f  mean %.1f  max %.1f us  %.0f ops/s  cpu %.1f us/op"+
		"  server cpu %.1f us/op  errors=%d\n", len(stat), pd.p50, pd.p99, pd.mean, pd.max,
		r["ops_per_s"], r["cpu_us_per_op"], r["server_cpu_us_per_op"], errors)
	return r
}

func connect(uris []string) []*redis.Client {
	cs := make([]*redis.Client, len(uris))
	for i, u := range uris {
		cs[i] = redis.NewClient(&redis.Options{Addr: addrOf(u)})
		if err := cs[i].Ping(context.Background()).Err(); err != nil {
			fail("PING %s: %v", u, err)
		}
	}
	return cs
}

func scenario1(uris []string, runID string) []row {
	say("scenario 1: redsync uncontended Lock+Unlock, %d iterations, %d warm-up\n",
		*iterations, *warmup)
	var rows []row
	for _, n := range []int{1, 3, 5} {
		if n > len(uris) {
			say("  skipped: %d servers (only %d)\n", n, len(uris))
			continue
		}
		clients, stat := connect(uris[:n]), connect(uris[:n])
		pools := make([]redis.UniversalClient, n)
		for i, c := range clients {
			pools[i] = c
		}
		rs := redsync.New(poolsOf(pools)...)
		m := rs.NewMutex(fmt.Sprintf("redsync-bench:%s:s1-n%d", runID, n),
			redsync.WithExpiry(leaseMs*time.Millisecond), redsync.WithTries(1))
		r := runPairs(m, *warmup, *iterations, stat)
		r["scenario"], r["impl"], r["what"], r["servers"] = 1, "redsync", "lock+unlock", n
		r["paused"], r["threads"], r["note"] = 0, 1, "WithExpiry 10 s, WithTries 1"
		rows = append(rows, r)
		for _, c := range append(clients, stat...) {
			_ = c.Close()
		}
	}
	return rows
}

func poolsOf(cs []redis.UniversalClient) []redsyncredis.Pool {
	ps := make([]redsyncredis.Pool, len(cs))
	for i, c := range cs {
		ps[i] = goredis.NewPool(c)
	}
	return ps
}

func modVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "?"
}

func main() {
	flag.Parse()
	if *contendWorker {
		contend()
		return
	}
	if *asJSON {
		say = func(f string, a ...any) { fmt.Fprintf(os.Stderr, f, a...) }
	}
	var uris []string
	for _, u := range strings.FieldsFunc(*urisFlag, func(r rune) bool { return r == ',' || r == ' ' }) {
		addrOf(u)
		uris = append(uris, u)
	}
	if len(uris) == 0 {
		fail("-uris is required")
	}
	runID := strconv.FormatInt(monoNs()^int64(os.Getpid())<<20, 16)
	doc := map[string]any{"tool": "redsync-bench", "redsync_version": modVersion("github.com/go-redsync/redsync/v4"),
		"goredis_version": modVersion("github.com/redis/go-redis/v9"), "go_version": runtime.Version(),
		"date": time.Now().UTC().Format(time.RFC3339), "iterations": *iterations, "warmup": *warmup}
	say("redsync-bench: redsync %s, go-redis %s, %s, run %s\n", doc["redsync_version"],
		doc["goredis_version"], doc["go_version"], runID)
	doc["results"] = scenario1(uris, runID)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		if err := enc.Encode(doc); err != nil {
			fail("json: %v", err)
		}
	}
}
