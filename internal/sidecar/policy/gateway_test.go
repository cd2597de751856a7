package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

func TestGatewayReadsItsFamilyOnly(t *testing.T) {
	h := new(fasthttp.RequestHeader)
	h.SetHost("app.example.com")
	for k, v := range map[string]string{
		"X-Original-Method": "POST", "X-Original-URI": "/login",
		"X-Forwarded-Method": "GET", "X-Forwarded-Uri": "/public", "X-Forwarded-Host": "www.example.com",
	} {
		h.Set(k, v)
	}
	for _, tc := range []struct {
		g                    policy.Gateway
		method, target, host string
	}{
		{policy.GatewayNginx, "POST", "/login", "app.example.com"},
		{policy.GatewayCaddy, "GET", "/public", "www.example.com"},
		{policy.GatewayTraefik, "GET", "/public", "www.example.com"},
	} {
		m, target, host, missing := tc.g.Original(h)
		require.Empty(t, missing, tc.g)
		assert.Equal(t, tc.method, string(m), tc.g)
		assert.Equal(t, tc.target, string(target), tc.g)
		assert.Equal(t, tc.host, string(host), tc.g)
	}
	_, _, _, missing := policy.GatewayUnset.Original(h)
	assert.NotEmpty(t, missing, "an unset gateway reads nothing")

	only := new(fasthttp.RequestHeader)
	only.Set("X-Forwarded-Uri", "/api/x")
	only.Set("X-Forwarded-Method", "GET")
	_, _, _, missing = policy.GatewayNginx.Original(only)
	assert.Equal(t, "X-Original-Method", missing, "the other family is no stand-in")
}

func TestParseGateway(t *testing.T) {
	for _, g := range policy.Gateways {
		got, err := policy.ParseGateway(g.String())
		require.NoError(t, err)
		assert.Equal(t, g, got)
	}
	got, err := policy.ParseGateway("NGINX")
	require.NoError(t, err)
	assert.Equal(t, policy.GatewayNginx, got)
	got, err = policy.ParseGateway("")
	require.NoError(t, err)
	assert.Equal(t, policy.GatewayUnset, got)
	for _, bad := range []string{"envoy", "apache", "nginx,caddy"} {
		_, err := policy.ParseGateway(bad)
		assert.ErrorIs(t, err, policy.ErrUnknownGateway, bad)
	}
}
