package memory_test

import (
	"runtime"
	"syscall"
)

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// cpuTime returns the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
