package memory_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/memory"
)

const benchIDs = 10_000

func benchRequests() []rl.Request {
	rs := make([]rl.Request, benchIDs)
	for i := range rs {
		rs[i] = rl.Request{ID: "user-" + strconv.Itoa(i), Scale: time.Minute, Limit: 1 << 30, Hits: 1}
	}
	return rs
}

// mutexMap is the baseline: a fixed window in a map behind one mutex.
type mutexMap struct {
	mu sync.Mutex
	m  map[mapKey]*algo.Record
}

type mapKey struct {
	id     string
	scale  int64
	bucket int64
}

func (m *mutexMap) CheckRate(_ context.Context, r rl.Request, now int64) rl.Decision {
	if err := check.Validate(r, 0); err != nil {
		return rl.Decision{}
	}
	m0 := millis.Of(r)
	k := mapKey{r.ID, m0.Scale, algo.Bucket(now, m0.Scale)}
	m.mu.Lock()
	rec, ok := m.m[k]
	var cur algo.Record
	if ok {
		cur = *rec
	}
	d, next, write := algo.Fixed(cur, ok, now, m0)
	if write {
		if ok {
			*rec = next
		} else {
			m.m[k] = &next
		}
	}
	m.mu.Unlock()
	return d.Public()
}

func BenchmarkCheckRate(b *testing.B) {
	rs := benchRequests()
	now := int64(1_700_000_000_000)
	b.Run("embedded/serial", func(b *testing.B) {
		l := memory.New(memory.Config{Clock: func() time.Time { return time.UnixMilli(now) }})
		defer l.Close()
		ctx := context.Background()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := l.CheckRate(ctx, rs[i%benchIDs]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mutexmap/serial", func(b *testing.B) {
		m := &mutexMap{m: map[mapKey]*algo.Record{}}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m.CheckRate(context.Background(), rs[i%benchIDs], now)
		}
	})
}

// BenchmarkCheckRateParallel checks from 128 goroutines at once
// (SetParallelism(128/GOMAXPROCS)), the limiter beside a mutex-guarded map;
// and from 4,096 on one shard (g=4096); and a denied flood, 128 goroutines
// checking one id over its limit of 1 (denied).
func BenchmarkCheckRateParallel(b *testing.B) {
	rs := benchRequests()
	now := int64(1_700_000_000_000)
	par := func(b *testing.B, goroutines int, check func(r rl.Request)) {
		var seq atomic.Uint64
		b.SetParallelism(goroutines / max(1, runtimeProcs()))
		b.ReportAllocs()
		cpu0 := cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(7919))
			for pb.Next() {
				check(rs[i%benchIDs])
				i++
			}
		})
		// CPU time per check: on a shared machine, less noisy than wall time.
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}
	embedded := func(shards, goroutines int) func(b *testing.B) {
		return func(b *testing.B) {
			l := memory.New(memory.Config{Shards: shards, Clock: func() time.Time { return time.UnixMilli(now) }})
			defer l.Close()
			ctx := context.Background()
			par(b, goroutines, func(r rl.Request) {
				if _, err := l.CheckRate(ctx, r); err != nil {
					b.Error(err)
				}
			})
		}
	}
	for _, shards := range []int{1, 2, 4} {
		b.Run("embedded/shards="+strconv.Itoa(shards), embedded(shards, 128))
	}
	b.Run("embedded/g=4096", embedded(1, 4096))
	b.Run("embedded/denied", func(b *testing.B) {
		l := memory.New(memory.Config{Shards: 1}) // the system's clock, read by every denial
		defer l.Close()
		ctx := context.Background()
		flood := rl.Request{ID: "flood", Scale: time.Minute, Limit: 1, Hits: 1}
		par(b, 128, func(rl.Request) {
			if _, err := l.CheckRate(ctx, flood); err != nil {
				b.Error(err)
			}
		})
	})
	b.Run("mutexmap", func(b *testing.B) {
		m := &mutexMap{m: map[mapKey]*algo.Record{}}
		par(b, 128, func(r rl.Request) { m.CheckRate(context.Background(), r, now) })
	})
}

// BenchmarkSlicesCheckRate is BenchmarkSlicesCheck of package buckets
// through the embedded limiter (validation, the actor's mailbox): a check
// of the sliding window counters at 60 slices at full use (1,000 ids each
// holding a record in every slice of an hour in minutes), beside a fixed
// window's on the same ids in the same run. perSlice is the checks each id
// makes per slice; the clock moves with the checks. cpu-ns/op is the
// process's CPU time per check, less noisy than wall time on a shared
// machine.
func BenchmarkSlicesCheckRate(b *testing.B) {
	const ids, slices = 1000, 60
	const scale = 3_600_000
	const w = scale / slices
	for _, perSlice := range []int{1, 10, 100} {
		for _, a := range []rl.Algo{rl.Fixed, rl.Slices} {
			b.Run("perSlice="+strconv.Itoa(perSlice)+"/"+a.String(), func(b *testing.B) {
				var now atomic.Int64
				now.Store(1_700_000_000_000 - 1_700_000_000_000%w)
				l := memory.New(memory.Config{Shards: 1, Clock: func() time.Time { return time.UnixMilli(now.Load()) }, SweepInterval: -1})
				defer l.Close()
				ctx := context.Background()
				rs := make([]rl.Request, ids)
				for i := range rs {
					rs[i] = rl.Request{ID: "id-" + strconv.Itoa(1_000_000_000+i*7919%ids), Scale: scale, Limit: 1 << 30, Hits: 1, Algo: a}
				}
				for range slices {
					if _, err := l.CheckRates(ctx, rs); err != nil {
						b.Fatal(err)
					}
					now.Add(w)
				}
				step := max(1, w/int64(perSlice*ids))
				b.ReportAllocs()
				cpu0 := cpuTime()
				for i := 0; b.Loop(); i++ {
					if _, err := l.CheckRate(ctx, rs[i%ids]); err != nil {
						b.Fatal(err)
					}
					now.Add(step)
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
