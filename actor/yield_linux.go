package actor

import "syscall"

// osYield gives the processor to another runnable thread, if one waits:
// the actor's thread, busy with a large batch, would otherwise keep it for
// the kernel's whole time slice while the thread that is to read a single
// check's request, or its caller, waits for a processor.
func osYield() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
