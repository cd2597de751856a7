package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	routerfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// There is no Envoy binary to run here (Debian has none): the envoy.yaml
// that docs/envoy.md shows is loaded into go-control-plane's bootstrap
// types, as Envoy's own loader reads it (every typed_config resolved to
// its message), validated with the generated rules, and its rate_limits
// actions are turned into the descriptors Envoy would send, which the
// sidecar's RLS then answers on the configuration the RLS tests use.

// The typed_config messages the file names, registered with protobuf by
// importing their packages.
var (
	_ = (*hcmv3.HttpConnectionManager)(nil)
	_ = (*ratelimitfilter.RateLimit)(nil)
	_ = (*routerfilter.Router)(nil)
	_ = (*upstreamhttpv3.HttpProtocolOptions)(nil)
)

// validator is what protoc-gen-validate generates on every message.
type validator interface{ ValidateAll() error }

// loadEnvoyConfig reads docs/gateways/envoy.yaml as Envoy's bootstrap.
func loadEnvoyConfig(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	var doc any
	require.NoError(t, yaml.Unmarshal([]byte(docFile(t, "envoy.yaml")), &doc))
	js, err := json.Marshal(doc)
	require.NoError(t, err)
	b := new(bootstrapv3.Bootstrap)
	require.NoError(t, protojson.UnmarshalOptions{}.Unmarshal(js, b), "docs/gateways/envoy.yaml is an Envoy bootstrap")
	return b
}

// unpack resolves an Any and validates what it holds.
func unpack[T proto.Message](t *testing.T, a *anypb.Any, m T) T {
	t.Helper()
	require.NotNil(t, a)
	require.NoError(t, a.UnmarshalTo(m), "%s", a.GetTypeUrl())
	require.NoError(t, any(m).(validator).ValidateAll(), "%s", a.GetTypeUrl())
	return m
}

func TestEnvoyConfigIsValid(t *testing.T) {
	b := loadEnvoyConfig(t)
	require.NoError(t, b.ValidateAll())

	clusters := map[string]bool{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = true
		for _, opt := range c.GetTypedExtensionProtocolOptions() {
			po := unpack(t, opt, new(upstreamhttpv3.HttpProtocolOptions))
			assert.NotNil(t, po.GetExplicitHttpConfig().GetHttp2ProtocolOptions(), "the RLS cluster speaks HTTP/2 (gRPC)")
		}
	}
	require.Len(t, b.GetStaticResources().GetListeners(), 1)
	l := b.GetStaticResources().GetListeners()[0]
	require.Len(t, l.GetFilterChains(), 1)
	hcm := unpack(t, l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig(), new(hcmv3.HttpConnectionManager))
	assert.True(t, hcm.GetUseRemoteAddress().GetValue(), "the client's address is the peer's, not a header it sends")

	filters := hcm.GetHttpFilters()
	require.Len(t, filters, 2)
	rl := unpack(t, filters[0].GetTypedConfig(), new(ratelimitfilter.RateLimit))
	unpack(t, filters[1].GetTypedConfig(), new(routerfilter.Router))
	assert.Equal(t, "envoy.filters.http.router", filters[len(filters)-1].GetName(), "the router comes last")
	assert.Equal(t, ratelimitfilter.RateLimit_DRAFT_VERSION_03, rl.GetEnableXRatelimitHeaders())
	svc := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	assert.True(t, clusters[svc], "the filter asks cluster %q, which the file defines", svc)
	for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			assert.True(t, clusters[r.GetRoute().GetCluster()], "route to a defined cluster")
			assert.NotEmpty(t, r.GetRoute().GetRateLimits(), "the route asks the rate limit service")
		}
	}
}

// envoyDescriptors builds the descriptors Envoy's route actions make for a
// request from client with headers hdr; an action the test does not know
// fails it, so the file cannot grow one the test does not follow.
func envoyDescriptors(t *testing.T, limits []*routev3.RateLimit, client string, hdr map[string]string) []*ratelimitv3.RateLimitDescriptor {
	t.Helper()
	var out []*ratelimitv3.RateLimitDescriptor
	for _, l := range limits {
		d := &ratelimitv3.RateLimitDescriptor{}
		complete := true
		for _, a := range l.GetActions() {
			switch s := a.GetActionSpecifier().(type) {
			case *routev3.RateLimit_Action_RemoteAddress_:
				d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "remote_address", Value: client})
			case *routev3.RateLimit_Action_RequestHeaders_:
				v, ok := hdr[strings.ToLower(s.RequestHeaders.GetHeaderName())]
				if !ok {
					complete = false // Envoy sends no descriptor without the header
					continue
				}
				d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: s.RequestHeaders.GetDescriptorKey(), Value: v})
			case *routev3.RateLimit_Action_GenericKey_:
				key := s.GenericKey.GetDescriptorKey()
				if key == "" {
					key = "generic_key"
				}
				d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: key, Value: s.GenericKey.GetDescriptorValue()})
			default:
				t.Fatalf("envoyDescriptors does not know action %T: teach it before the file uses it", s)
			}
		}
		if complete {
			out = append(out, d)
		}
	}
	return out
}

// TestEnvoyConfigAgainstTheRLS sends what the documented envoy.yaml makes
// Envoy send, to the sidecar's RLS on the RLS tests' configuration: the
// domain and descriptors find their rule (edge_proxy_per_ip: 10 a second
// per address, none for 50.0.0.5).
func TestEnvoyConfigAgainstTheRLS(t *testing.T) {
	b := loadEnvoyConfig(t)
	hcm := new(hcmv3.HttpConnectionManager)
	require.NoError(t, b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm))
	filter := new(ratelimitfilter.RateLimit)
	require.NoError(t, hcm.GetHttpFilters()[0].GetTypedConfig().UnmarshalTo(filter))
	limits := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetRateLimits()

	_, c, _ := startRLS(t)
	earlyInSecond()
	for i := range 10 {
		ds := envoyDescriptors(t, limits, "50.0.0.1", map[string]string{":path": "/api/x"})
		require.Len(t, ds, 1)
		checkRLS(t, ask(t, c, filter.GetDomain(), 0, ds...), false, st{rpu: 10, unit: second, remaining: uint32(9 - i)})
	}
	ds := envoyDescriptors(t, limits, "50.0.0.1", nil)
	checkRLS(t, ask(t, c, filter.GetDomain(), 0, ds...), true, st{over: true, rpu: 10, unit: second})
	ds = envoyDescriptors(t, limits, "50.0.0.5", nil)
	checkRLS(t, ask(t, c, filter.GetDomain(), 0, ds...), true, st{over: true, rpu: 0, unit: second})
	ds = envoyDescriptors(t, limits, "50.0.0.2", nil)
	checkRLS(t, ask(t, c, filter.GetDomain(), 0, ds...), false, st{rpu: 10, unit: second, remaining: 9})
}

func TestEnvoyDocShowsTheTestedFile(t *testing.T) {
	doc, err := os.ReadFile("../../docs/envoy.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), docFile(t, "envoy.yaml"), "docs/envoy.md shows docs/gateways/envoy.yaml as it is")
}
