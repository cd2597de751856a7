//go:build !linux

package buckets

// threadCPU is 0 where the thread's CPU time is not at hand: the benchmarks
// then report wall time only.
func threadCPU() int64 { return 0 }
