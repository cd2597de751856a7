package redisbackend

import "time"

// NewWithProbe is New with an open circuit letting a call try Redis every
// probe (and the first pauses between attempts to connect that long): for
// tests that wait for a recovery.
func NewWithProbe(cfg Config, probe time.Duration) (*Backend, error) {
	return newBackend(cfg, options{probeInterval: probe})
}
