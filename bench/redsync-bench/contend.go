// SPDX-License-Identifier: BSD-3-Clause

// The contended case (bench/contend.js): this process is one of N on one
// lock on one server. It warms up on a lock of its own, says "ready", waits
// for a line on stdin ("go WARM_END END", CLOCK_MONOTONIC ns: the same
// deadlines for all; a bare "go" means now + -warm-s and + -duration), then
// loops unrecorded until WARM_END and recorded until END: Lock (redsync's defaults: 32 tries, a random 50-250 ms
// between them, i.e. polling), hold -hold-us, Unlock, sleep -think-us. It
// prints what contend.js merges: one line per hold "h ACQUIRED
// UNLOCK_CALLED UNLOCK_RETURNED" (CLOCK_MONOTONIC ns). With -crash-holder or
// -crash-waiter it is a process of the crash case instead (crash, below).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"
)

var (
	contendWorker = flag.Bool("contend-worker", false, "be one process of the contended case")
	cURI          = flag.String("uri", "", "the one server (contend-worker)")
	cName         = flag.String("name", "", "the lock (contend-worker)")
	cDuration     = flag.Float64("duration", 10, "seconds of contention, measured")
	cWarmS        = flag.Float64("warm-s", 3, "seconds of contention before, unrecorded")
	cHoldUs       = flag.Int64("hold-us", 100, "µs the lock is held (spinning)")
	cThinkUs      = flag.Int64("think-us", 1000, "µs slept between an unlock and the next Lock")
	crashHolder   = flag.Bool("crash-holder", false, "be the holder of the crash case (bench/crash.js)")
	crashWaiter   = flag.Bool("crash-waiter", false, "be a waiter of the crash case (bench/crash.js)")
	crashTTLMs    = flag.Int64("ttl-ms", 1000, "the crash case holder's lease, ms")
)

func spinUntil(t int64) {
	for monoNs() < t {
	}
}

type contendRun struct {
	holds  [][3]int64
	failed int
	t0, t1 int64
	cpuUs  float64
}

// loop runs the worker's loop until end, recording holds from warmEnd on.
func loop(m *redsync.Mutex, warmEnd, end int64) contendRun {
	var r contendRun
	var c0 float64
	recording := false
	r.t0 = end
	for {
		t := monoNs()
		if t >= end {
			break
		}
		if !recording && t >= warmEnd {
			recording, r.t0, c0 = true, t, cpuUs()
		}
		if err := m.Lock(); err != nil {
			if recording {
				r.failed++ // all tries used up: ask again, as a user would
			}
			continue
		}
		a := monoNs()
		spinUntil(a + *cHoldUs*1000)
		u := monoNs()
		if ok, err := m.Unlock(); !ok || err != nil {
			fail("unlock: %v %v", ok, err)
		}
		if recording {
			r.holds = append(r.holds, [3]int64{a, u, monoNs()})
		}
		time.Sleep(time.Duration(*cThinkUs) * time.Microsecond)
	}
	r.t1 = monoNs()
	if recording {
		r.cpuUs = cpuUs() - c0
	}
	return r
}

func contend() {
	c := redis.NewClient(&redis.Options{Addr: addrOf(*cURI)})
	rs := redsync.New(poolsOf([]redis.UniversalClient{c})...)
	opt := redsync.WithExpiry(leaseMs * time.Millisecond)
	warm := rs.NewMutex(fmt.Sprintf("%s:warm:%d", *cName, os.Getpid()), opt, redsync.WithTries(1))
	for i := 0; i < *warmup; i++ {
		if warm.Lock() == nil {
			_, _ = warm.Unlock()
		}
	}
	m := rs.NewMutex(*cName, opt)
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadString('\n')
	if err != nil {
		fail("no go line: %v", err)
	}
	if *crashHolder || *crashWaiter {
		crash(rs, m, in)
		return
	}
	var warmEnd, end int64
	if n, _ := fmt.Sscanf(line, "go %d %d", &warmEnd, &end); n != 2 {
		warmEnd = monoNs() + int64(*cWarmS*1e9)
		end = warmEnd + int64(*cDuration*1e9)
	}
	r := loop(m, warmEnd, end)
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "window %d %d\ncpu %.0f\nfailed %d\n", r.t0, r.t1, r.cpuUs, r.failed)
	for _, h := range r.holds {
		fmt.Fprintf(out, "h %d %d %d\n", h[0], h[1], h[2])
	}
	fmt.Fprintln(out, "end")
	_ = out.Flush()
}

// crash is the crash case (bench/crash.js): the holder takes the lock with a
// lease of -ttl-ms and waits to be killed; a waiter calls Lock (again when
// out of tries), prints "got T 0" and unlocks.
func crash(rs *redsync.Redsync, m *redsync.Mutex, in *bufio.Reader) {
	if *crashHolder {
		h := rs.NewMutex(*cName, redsync.WithExpiry(time.Duration(*crashTTLMs)*time.Millisecond))
		if err := h.Lock(); err != nil {
			fail("holder: %v", err)
		}
		fmt.Printf("held %d\n", monoNs())
		_, _ = in.ReadString('\n') // until killed
		select {}
	}
	for m.Lock() != nil {
	}
	a := monoNs()
	_, _ = m.Unlock()
	fmt.Printf("got %d 0\nend\n", a)
}
