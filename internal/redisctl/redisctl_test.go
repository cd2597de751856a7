package redisctl_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/raterlimiter/raterlimiter/internal/redisctl"
)

func TestCheckURL(t *testing.T) {
	for _, u := range []string{"redis://127.0.0.1:6379/0", "rediss://h:6380", "unix:///tmp/redis.sock", "redis://a:1?addr=b:2&addr=c:3"} {
		assert.NoError(t, redisctl.CheckURL(u), u)
	}
	for _, u := range []string{"http://127.0.0.1:6379", "redis://h:6379/x", "::"} {
		assert.Error(t, redisctl.CheckURL(u), u)
	}
}

// TestNotLinked: without package redisbackend linked in, nothing is a
// Redis backend and New says so rather than returning a zero backend.
func TestNotLinked(t *testing.T) {
	_, ok := redisctl.Of(struct{}{})
	assert.False(t, ok)
	assert.Equal(t, "other", redisctl.Reason(nil))
	assert.Panics(t, func() { _, _ = redisctl.New[*struct{}](struct{}{}, redisctl.Options{}) })
}
