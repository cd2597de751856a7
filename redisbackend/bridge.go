package redisbackend

import (
	"context"

	"github.com/raterlimiter/raterlimiter/internal/redisctl"
)

// ctl is a *Backend's face for internal/redisctl: the health check and the
// circuit's state.
type ctl struct{ b *Backend }

func (c ctl) Ping(ctx context.Context) error { return c.b.ping(ctx) }
func (c ctl) Up() bool                       { return c.b.up() }

func init() {
	redisctl.Register(newBackend, func(l any) (redisctl.Backend, bool) {
		switch b := l.(type) {
		case *Backend:
			if b != nil {
				return ctl{b}, true
			}
		case strict:
			return ctl{b.Backend}, true
		}
		return nil, false
	}, reason)
}
