package api

import (
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/valyala/fasthttp"
)

// The server streams request bodies (fasthttp.Server.StreamRequestBody):
// fasthttp reads a request's headers and at most its first 8 KiB of body
// (one byte of a body over 16 KiB; its read buffer may hold more, which the
// budget counts once), and readBody decides, from Content-Length, whether the rest may be read
// at all. Without it fasthttp would size a buffer by Content-Length before
// reading a byte of the body, and a flood of connections each announcing a
// big body and never finishing it would hold that memory however small the
// budget.

// prefetched is how much of a body fasthttp reads before the handler runs
// (less when the cap on bodies is smaller).
const prefetched = 8 << 10

// headerReceived keeps fasthttp from reading ahead more than one byte of a
// body bigger than a connection may hold whatever the budget: readBody
// admits it by its Content-Length first, and refuses one over the cap
// without waiting for more of it.
func headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.ContentLength() > bodyAllowance {
		return fasthttp.RequestConfig{MaxRequestBodySize: 1}
	}
	return fasthttp.RequestConfig{}
}

// headLen is about the length of a request's line and headers as they
// came: what the connection read before its body.
func headLen(ctx *fasthttp.RequestCtx) int64 {
	h := &ctx.Request.Header
	return int64(len(h.Method()) + len(h.RequestURI()) + len(" HTTP/1.1\r\n") + len(h.RawHeaders()) + len("\r\n"))
}

// bodies holds the buffers big bodies are read into.
var bodies = sync.Pool{New: func() any { return new([]byte) }}

// readBody reads the rest of a request body fasthttp left unread, within
// the cap on bodies and the server's body budget: a body over the cap gets
// 413, one the budget cannot hold now gets 503 with Retry-After, and both
// close the connection without reading it. It reports whether the request
// may be handled; done gives the body's buffer back once it has been.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) (done func(), ok bool) {
	stream := ctx.RequestBodyStream()
	n := ctx.Request.Header.ContentLength()
	if stream == nil {
		return func() {}, true // no body
	}
	if n > s.cfg.MaxBodyBytes {
		ctx.SetConnectionClose()
		s.fail(ctx, fasthttp.StatusRequestEntityTooLarge, "api: request body too large")
		return nil, false
	}
	if n >= 0 && n <= prefetched {
		return func() {}, true // all of it read already
	}
	if lc, isLimited := ctx.Conn().(*limitConn); isLimited && n > 0 && !lc.reserve(int64(n), headLen(ctx)) {
		ctx.SetConnectionClose()
		ctx.Response.Header.Set("Retry-After", "1")
		s.fail(ctx, fasthttp.StatusServiceUnavailable, "api: the server holds its budget of request bodies; retry later")
		return nil, false
	}
	p := bodies.Get().(*[]byte)
	done = func() {
		if cap(*p) <= 1<<20 {
			bodies.Put(p)
		}
	}
	b, err := readAll(stream, (*p)[:0], n, s.cfg.MaxBodyBytes)
	*p = b
	if err != nil {
		done()
		ctx.SetConnectionClose()
		var timeout interface{ Timeout() bool }
		switch {
		case errors.Is(err, fasthttp.ErrBodyTooLarge):
			s.fail(ctx, fasthttp.StatusRequestEntityTooLarge, "api: request body too large")
		case errors.As(err, &timeout) && timeout.Timeout():
			s.fail(ctx, fasthttp.StatusRequestTimeout, "api: request not read in time")
		default:
			s.fail(ctx, fasthttp.StatusBadRequest, "api: request body not read whole")
		}
		return nil, false
	}
	ctx.Request.SetBodyRaw(b)
	return done, true
}

// readAll appends to b the body in r: n bytes, or for a chunked body (n
// -1) everything up to its end, refused past limit bytes.
func readAll(r io.Reader, b []byte, n, limit int) ([]byte, error) {
	if n >= 0 {
		b = slices.Grow(b[:0], n)
		_, err := io.ReadFull(r, b[:n])
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return b[:n], err
	}
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(2*cap(b)+4096, limit+1)-len(b))
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if len(b) > limit {
			return b, fasthttp.ErrBodyTooLarge
		}
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
