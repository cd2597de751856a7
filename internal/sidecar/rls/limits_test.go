package rls

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTapLeavesCallsDueBeforeTheReceiveTimeout: a call whose own deadline
// comes within the receive timeout (Envoy's filter sends one on every call)
// gets no receive timer of ours, since grpc-go ends it at that deadline
// anyway; a call with no deadline or a later one gets the timer.
func TestTapLeavesCallsDueBeforeTheReceiveTimeout(t *testing.T) {
	g := NewGuard(Limits{ReceiveTimeout: time.Hour})
	soon, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := g.tap(soon, nil)
	require.NoError(t, err)
	assert.Nil(t, got.Value(arrivalKey{}), "no receive timer for a call due first")
	assert.Equal(t, soon, got, "the call's context as it came")

	late, cancelLate := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancelLate()
	for name, ctx := range map[string]context.Context{"no deadline": context.Background(), "a later deadline": late} {
		got, err := g.tap(ctx, nil)
		require.NoError(t, err)
		a, ok := got.Value(arrivalKey{}).(*arrival)
		require.True(t, ok, "%s: a receive timer", name)
		assert.True(t, a.arrived(), "%s: stopped by the request's arrival", name)
		assert.NoError(t, got.Err(), "%s: the call goes on", name)
	}
}
