package main

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// sameServer is barecheck -same: a fasthttp server named as the sidecar
// whose handler answers GET /check_rate with the sidecar's bytes for an
// allowed check. now gives the time of a request (nil: the time fasthttp
// read it at, ctx.Time); tests fix it to compare with the sidecar.
func sameServer(now func() time.Time) *fasthttp.Server {
	return &fasthttp.Server{Name: "raterlimiter", Handler: func(ctx *fasthttp.RequestCtx) {
		t := ctx.Time()
		if now != nil {
			t = now()
		}
		handleSame(ctx, t)
	}}
}

// handleSame parses the query as handle does and answers as the sidecar
// answers an allowed check of it: the rate-limit headers (RateLimit-Policy,
// RateLimit, X-RateLimit-Limit, -Remaining, -Reset) and the decision's JSON
// body, formatted per request with strconv into a buffer on the stack, the
// header names sent as spelled (the sidecar's DisableNormalizing).
func handleSame(ctx *fasthttp.RequestCtx, now time.Time) {
	id, scale, limit, hits, ok := parseCheck(ctx)
	if !ok || len(id) == 0 || !utf8.Valid(id) {
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		ctx.SetBodyString(`{"error":"bad request"}`)
		return
	}
	// The fixed window of scale (ms, aligned to the epoch) that holds now.
	at := now.UnixMilli()
	end := (at/scale + 1) * scale
	reset := end - at
	remaining := max(0, limit-hits)

	h := &ctx.Response.Header
	h.DisableNormalizing()
	var b [128]byte
	v := append(b[:0], `"default";q=`...)
	v = strconv.AppendInt(v, limit, 10)
	v = append(v, ";w="...)
	v = strconv.AppendInt(v, max(1, ceilSec(scale)), 10)
	h.SetBytesV("RateLimit-Policy", v)
	v = append(b[:0], `"default";r=`...)
	v = strconv.AppendInt(v, remaining, 10)
	v = append(v, ";t="...)
	v = strconv.AppendInt(v, ceilSec(reset), 10)
	h.SetBytesV("RateLimit", v)
	h.SetBytesV("X-RateLimit-Limit", strconv.AppendInt(b[:0], limit, 10))
	h.SetBytesV("X-RateLimit-Remaining", strconv.AppendInt(b[:0], remaining, 10))
	h.SetBytesV("X-RateLimit-Reset", strconv.AppendInt(b[:0], ceilSec(end), 10))
	ctx.SetContentType("application/json")

	var body [256]byte
	o := append(body[:0], `{"allowed":true,"status":"ok","id":`...)
	o = appendJSONString(o, id)
	o = append(o, `,"count":`...)
	o = strconv.AppendInt(o, hits, 10)
	o = append(o, `,"limit":`...)
	o = strconv.AppendInt(o, limit, 10)
	o = append(o, `,"remaining":`...)
	o = strconv.AppendInt(o, remaining, 10)
	o = append(o, `,"reset_ms":`...)
	o = strconv.AppendInt(o, reset, 10)
	o = append(o, `,"retry_after_ms":0,"delay_ms":0}`...)
	ctx.SetBody(o)
}

// ceilSec converts milliseconds to seconds, rounding up.
func ceilSec(ms int64) int64 { return (ms + 999) / 1000 }

// appendJSONString appends s (valid UTF-8) as a JSON string.
func appendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
