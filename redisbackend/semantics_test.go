package redisbackend_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// factory returns limiters on url, each case under its own key prefix so the
// cases never see each other's keys on the shared server.
func factory(url string) limitertest.Factory {
	n := 0
	return func(t *testing.T, clock *limitertest.Clock) rl.Limiter {
		n++
		b, err := redisbackend.New(redisbackend.Config{
			URL:     url,
			Prefix:  "t" + string(rune('a'+n%26)) + itoa(n),
			Clock:   clock.Now,
			Timeout: 2e9, // generous: the machine is shared; timeouts are tested elsewhere
		})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return b
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func TestSemanticsSingleNode(t *testing.T) {
	srv := redistest.Start(t)
	limitertest.Run(t, factory(srv.URL()))
}

func TestSemanticsCluster(t *testing.T) {
	c := startCluster(t)
	limitertest.Run(t, factory(c.URL()))
	// The ids' keys spread over the masters: the cluster was really used.
	for _, n := range c.Nodes {
		reply, err := n.Do("DBSIZE")
		require.NoError(t, err)
		assert.NotEqual(t, ":0", reply, "node %s holds keys", n.Addr())
	}
}
