package main

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/memory"
)

// TestServiceUnavailableIsNotCounted: a check answered 503 because the
// actor was busy past the request's timeout is skipped by the actor once it
// is free, so a client that retries on 503 is counted once.
func TestServiceUnavailableIsNotCounted(t *testing.T) {
	const timeout = 100 * time.Millisecond
	s := startRelServer(t, memory.Config{Shards: 1, SweepInterval: -1}, api.Config{Timeout: timeout})
	check := func(id string, hits int) (int, string) {
		t.Helper()
		r, err := http.Get(fmt.Sprintf("http://%s/check_rate?id=%s&scale=600000&limit=100&hits=%d", s.addr, id, hits))
		require.NoError(t, err)
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		return r.StatusCode, string(b)
	}
	for round := range 3 {
		id := fmt.Sprintf("retry%d", round)
		release := blockActor(s)
		st, body := check(id, 1)
		require.Equal(t, 503, st, body)
		require.NoError(t, release())
		st, body = check(id, 0)
		require.Equal(t, 200, st, body)
		assert.Contains(t, body, `"count":0,`, "round %d: the check answered 503 was counted", round)
		st, body = check(id, 1) // the client's retry
		require.Equal(t, 200, st, body)
		assert.Contains(t, body, `"count":1,`, "round %d: the retry", round)
	}
}
