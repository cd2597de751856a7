package policy

import (
	"errors"
	"strings"
)

// Gateway is the reverse proxy that asks /auth about each request, and so
// the one family of headers that carries the original request. Each proxy
// sets its own family and overwrites a client's copy of it, but passes the
// other families through as the client sent them: a sidecar that read
// both could be told any path by any client. The zero Gateway is unset:
// /auth then reads nothing and refuses to answer.
type Gateway uint8

const (
	// GatewayUnset reads no family: /auth refuses to answer.
	GatewayUnset Gateway = iota
	// GatewayNginx reads what the documented nginx block sets with
	// proxy_set_header (which replaces a client's header of the same
	// name): X-Original-Method, X-Original-URI and Host.
	GatewayNginx
	// GatewayCaddy reads what Caddy's forward_auth and reverse_proxy set,
	// overwriting a client's copies: X-Forwarded-Method, X-Forwarded-Uri
	// and X-Forwarded-Host.
	GatewayCaddy
	// GatewayTraefik reads what Traefik's ForwardAuth sets, overwriting a
	// client's copies (trustForwardHeader: false): X-Forwarded-Method,
	// X-Forwarded-Uri and X-Forwarded-Host.
	GatewayTraefik
)

// Gateways lists the gateways ParseGateway knows, in the order messages
// name them.
var Gateways = []Gateway{GatewayNginx, GatewayCaddy, GatewayTraefik}

// ErrUnknownGateway is returned by ParseGateway for a name it does not
// know.
var ErrUnknownGateway = errors.New("policy: unknown gateway: want nginx, caddy or traefik")

// ParseGateway returns the gateway called name ("nginx", "caddy",
// "traefik"); "" is GatewayUnset.
func ParseGateway(name string) (Gateway, error) {
	if name == "" {
		return GatewayUnset, nil
	}
	for _, g := range Gateways {
		if strings.EqualFold(name, g.String()) {
			return g, nil
		}
	}
	return GatewayUnset, ErrUnknownGateway
}

// String is the gateway's name as ParseGateway reads it ("" when unset).
func (g Gateway) String() string {
	switch g {
	case GatewayNginx:
		return "nginx"
	case GatewayCaddy:
		return "caddy"
	case GatewayTraefik:
		return "traefik"
	}
	return ""
}

// OriginalHeaders names the headers that carry the original request's
// method, target (path and query, as the client sent it) and host.
type OriginalHeaders struct {
	// Method, URI and Host are the headers' names.
	Method, URI, Host string
}

// Headers returns the gateway's family of headers; the zero
// OriginalHeaders when g is unset.
func (g Gateway) Headers() OriginalHeaders {
	switch g {
	case GatewayNginx:
		return OriginalHeaders{Method: "X-Original-Method", URI: "X-Original-URI", Host: "Host"}
	case GatewayCaddy, GatewayTraefik:
		return OriginalHeaders{Method: "X-Forwarded-Method", URI: "X-Forwarded-Uri", Host: "X-Forwarded-Host"}
	}
	return OriginalHeaders{}
}

// Original reads the original request's method, target and host from h
// in g's family. missing names the method or target header when h lacks
// it ("" when both are there): the proxy is not configured as documented,
// and the request must not be matched against anything else. The host may
// be absent (an HTTP/1.0 request without Host): it then matches no
// policy's host.
func (g Gateway) Original(h Headers) (method, target, host []byte, missing string) {
	names := g.Headers()
	if names.Method == "" {
		return nil, nil, nil, "the gateway"
	}
	if method = h.Peek(names.Method); len(method) == 0 {
		return nil, nil, nil, names.Method
	}
	if target = h.Peek(names.URI); len(target) == 0 {
		return nil, nil, nil, names.URI
	}
	return method, target, h.Peek(names.Host), ""
}
