// Command rlsfloor is a gRPC server of the Envoy rate limit service that
// answers every ShouldRateLimit with one constant OK, with the stream
// workers of the sidecar's -rls-listen: what an RLS
// call costs in grpc-go alone, the floor of any RLS server built on it
// (lab/scripts/bench-rls-peer.sh).
//
// Usage: rlsfloor HOST:PORT
package main

import (
	"context"
	"fmt"
	"net"
	"os"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

type floor struct {
	rlspb.UnimplementedRateLimitServiceServer
}

var ok = &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK,
	Statuses: []*rlspb.RateLimitResponse_DescriptorStatus{{Code: rlspb.RateLimitResponse_OK}}}

func (floor) ShouldRateLimit(context.Context, *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	return ok, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rlsfloor HOST:PORT")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlsfloor:", err)
		os.Exit(1)
	}
	g := grpc.NewServer(grpc.NumStreamWorkers(256))
	rlspb.RegisterRateLimitServiceServer(g, floor{})
	fmt.Fprintln(os.Stderr, "rlsfloor:", g.Serve(ln))
	os.Exit(1)
}
