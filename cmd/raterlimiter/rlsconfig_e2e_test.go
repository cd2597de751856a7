package main

import (
	"path/filepath"
	"strings"
	"testing"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestCheckRLSConfig: -check-rls-config loads a configuration without
// serving: exit 0 and what it holds, or exit 2 and file:line: message.
func TestCheckRLSConfig(t *testing.T) {
	code, out, errOut := runBinary(t, nil, "-check-rls-config", compatConfig)
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, compatConfig+": ok, 8 files, 8 domains, 16 rate limits\n", out)

	bad := t.TempDir()
	require.NoError(t, writeFile(bad+"/a.yaml", "domain: d\ndescriptors:\n  - key: k\n    value: a*b\n    share_threshold: true\n"))
	code, out, errOut = runBinary(t, nil, "-check-rls-config", bad)
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Equal(t, "raterlimiter: "+bad+"/a.yaml:5: a descriptor: share_threshold needs a value ending in '*' (a wildcard), not \"k_a*b\"\n", errOut)

	// One domain in two files: refused, naming the flag that merges them.
	two := t.TempDir()
	require.NoError(t, writeFile(two+"/a.yaml", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"))
	require.NoError(t, writeFile(two+"/b.yaml", "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"))
	code, _, errOut = runBinary(t, nil, "-check-rls-config", two)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, two+`/b.yaml:1: domain "d" is defined twice (first in `+two+"/a.yaml); merging one domain's files is an option (-rls-merge-domains merges them)")
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
	code, out, errOut = runBinary(t, nil, "-check-rls-config", two, "-rls-merge-domains")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, two+": ok, 2 files, 1 domains, 2 rate limits\n", out)
	code, out, errOut = runBinary(t, []string{"RATERLIMITER_RLS_MERGE_DOMAINS=true"}, "-check-rls-config", two)
	assert.Equal(t, 0, code, "the environment sets -rls-merge-domains: %s", errOut)
	assert.Equal(t, two+": ok, 2 files, 1 domains, 2 rate limits\n", out)

	// The check is for the command line only: in the environment it
	// would turn a sidecar into a program that checks and exits.
	code, _, errOut = runBinary(t, []string{"RATERLIMITER_CHECK_RLS_CONFIG=" + two}, "-rls-merge-domains")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-rls-merge-domains needs -rls-config or -check-rls-config")
}

// TestRLSMergeDomainsServes: with -rls-merge-domains the sidecar serves
// one domain from two files, as envoyproxy/ratelimit with
// MERGE_DOMAIN_CONFIG=true; without it, it refuses to start.
func TestRLSMergeDomainsServes(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "a.yaml"), "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"))
	require.NoError(t, writeFile(filepath.Join(dir, "b.yaml"), "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"))
	code, _, errOut := runBinary(t, nil, "-listen", "127.0.0.1:0", "-rls-listen", "127.0.0.1:0", "-rls-config", dir)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "(-rls-merge-domains merges them)")

	s := start(t, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", dir, "-rls-merge-domains")
	conn, err := grpc.NewClient(s.listenAddr(t, "rls"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	c := rlspb.NewRateLimitServiceClient(conn)
	checkRLS(t, ask(t, c, "d", 0, desc("a", "x"), desc("b", "x")), false, st{rpu: 1, unit: minute, remaining: 0}, st{rpu: 2, unit: minute, remaining: 1})
	checkRLS(t, ask(t, c, "d", 0, desc("a", "x"), desc("b", "x")), true, st{over: true, rpu: 1, unit: minute}, st{rpu: 2, unit: minute, remaining: 0})
	require.NoError(t, s.stop(t))
}

// TestRLSQuotaModeAndMetadata: -rls-quota-mode answers OK over the limit,
// and -rls-response-metadata says which descriptor was over, as
// envoyproxy/ratelimit's QUOTA_MODE and RESPONSE_DYNAMIC_METADATA.
func TestRLSQuotaModeAndMetadata(t *testing.T) {
	code, _, errOut := runBinary(t, nil, "-listen", "127.0.0.1:0", "-rls-quota-mode")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-rls-quota-mode, -rls-response-metadata and -rls-response-headers need -rls-listen")

	_, c, _ := startRLS(t, "-rls-quota-mode", "-rls-response-metadata")
	resp := ask(t, c, "mongo_cps", 501, desc("database", "users"))
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode)
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.Statuses[0].Code)
	assert.Equal(t, uint32(500), resp.Statuses[0].CurrentLimit.GetRequestsPerUnit())
	assert.Zero(t, resp.Statuses[0].LimitRemaining)
	assert.Nil(t, resp.Statuses[0].DurationUntilReset, "quota mode: no reset")
	require.NotNil(t, resp.DynamicMetadata)
	assert.Equal(t, []any{float64(0)}, resp.DynamicMetadata.AsMap()["quotaModeViolations"])
	assert.Equal(t, "mongo_cps", resp.DynamicMetadata.AsMap()["domain"])
}
