package redisbackend

import (
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

// NewWithProbe is New with an open circuit letting a call try Redis every
// probe (and the first pauses between attempts to connect that long): for
// tests that wait for a recovery.
func NewWithProbe(cfg Config, probe time.Duration) (*Backend, error) {
	return newBackend(cfg, probe)
}

// codeOf returns the code of algorithm a in keys and index fields.
func codeOf(a rl.Algo) string {
	if e := engines[a]; e != nil {
		return e.code
	}
	return fixedCode
}
