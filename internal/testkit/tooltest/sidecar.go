package tooltest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/api"
)

// Serve serves the API configured by cfg on 127.0.0.1 and returns its base
// URL ("http://127.0.0.1:PORT"). The test's cleanup shuts the server down
// and checks that it stopped cleanly.
func Serve(t testing.TB, cfg api.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := api.New(cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
		assert.NoError(t, <-done)
	})
	return "http://" + ln.Addr().String()
}
