package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// onHangup calls reload, from a goroutine of its own, on every SIGHUP until
// ctx ends. Each caller registers a channel of its own: os/signal delivers a
// signal to every channel registered for it, so the policies, the
// certificate and the RLS configuration all reload on one SIGHUP.
func onHangup(ctx context.Context, reload func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reload()
			}
		}
	}()
}
