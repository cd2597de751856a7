package client

import (
	"encoding/json"
	"strconv"
	"syscall"
	"testing"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perItem reports wall and CPU time per decoded item.
func perItem(b *testing.B, cpu0 time.Duration, items int) {
	n := float64(b.N * items)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/item")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/n, "cpu-ns/item")
}

// BenchmarkDecodeBatchAnswer decodes the answer to a batch of 500 as the
// API writes it: the batch decoder, and encoding/json as the baseline.
func BenchmarkDecodeBatchAnswer(b *testing.B) {
	body := []byte("[")
	for i := range 500 {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"allowed":true,"status":"ok","id":"user-`+strconv.Itoa(i*17)+`","count":123,"limit":1000000000,"remaining":999999877,"reset_ms":41234,"retry_after_ms":0,"delay_ms":0}`...)
	}
	body = append(body, ']')
	b.Run("fast", func(b *testing.B) {
		ds := make([]rl.Decision, 0, 500)
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			var err error
			ds, err = decodeBatchAnswer(body, ds)
			if err != nil || len(ds) != 500 {
				b.Fatal(err)
			}
		}
		perItem(b, cpu0, 500)
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			var ds []rl.Decision
			if err := json.Unmarshal(body, &ds); err != nil {
				b.Fatal(err)
			}
		}
		perItem(b, cpu0, 500)
	})
}

// BenchmarkAppendBatchJSON encodes a batch of 500 checks as the batcher
// sends it.
func BenchmarkAppendBatchJSON(b *testing.B) {
	rs := make([]rl.Request, 500)
	for i := range rs {
		rs[i] = rl.Request{ID: "user-" + strconv.Itoa(i*17), Scale: time.Minute, Limit: 1_000_000, Hits: 1, Algo: rl.Sliding}
	}
	var buf []byte
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		buf = appendBatchJSON(buf[:0], rs)
	}
	perItem(b, cpu0, len(rs))
}
