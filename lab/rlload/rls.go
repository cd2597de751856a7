package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	rl "github.com/raterlimiter/raterlimiter"
)

// rlsChecker sends each check as one Envoy RLS ShouldRateLimit call with one
// descriptor of one entry (key, the check's id), as Envoy's rate limit
// filter sends a request: over HTTP/2 connections the callers share, each
// call with a deadline (Envoy's filter sends its timeout as grpc-timeout).
// Any RLS server answers it: the sidecar's -rls-listen or
// envoyproxy/ratelimit. The request's scale and limit are the server's
// configuration's, not the check's.
type rlsChecker struct {
	conns   []*grpc.ClientConn
	clients []rlspb.RateLimitServiceClient
	next    atomic.Uint64
	domain  string
	key     string
	timeout time.Duration
}

// newRLSChecker dials addr n times (at least once).
func newRLSChecker(addr, domain, key string, n int, timeout time.Duration) (*rlsChecker, error) {
	c := &rlsChecker{domain: domain, key: key, timeout: timeout}
	for range max(n, 1) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("rlload: -rls: %w", err)
		}
		c.conns = append(c.conns, conn)
		c.clients = append(c.clients, rlspb.NewRateLimitServiceClient(conn))
	}
	return c, nil
}

// CheckRate asks the server about r.ID. Allowed is the overall code;
// Remaining and Limit are the descriptor's status.
func (c *rlsChecker) CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error) {
	req := &rlspb.RateLimitRequest{Domain: c.domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: c.key, Value: r.ID}}}}}
	if r.Hits != 1 {
		req.HitsAddend = uint32(r.Hits) // 0 means 1 in RLS: a peek cannot be asked for
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	rc := c.clients[c.next.Add(1)%uint64(len(c.clients))]
	resp, err := rc.ShouldRateLimit(ctx, req)
	if err != nil {
		return rl.Decision{}, err
	}
	d := rl.Decision{Allowed: resp.OverallCode == rlspb.RateLimitResponse_OK}
	if len(resp.Statuses) == 1 {
		st := resp.Statuses[0]
		d.Remaining = int64(st.LimitRemaining)
		if st.CurrentLimit != nil {
			d.Limit = int64(st.CurrentLimit.RequestsPerUnit)
		}
	}
	return d, nil
}

// Close closes every connection.
func (c *rlsChecker) Close() {
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}
