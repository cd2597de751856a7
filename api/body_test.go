package api_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// serveTCP serves cfg, on a memory limiter of its own, on a loopback port
// and returns the address.
func serveTCP(t *testing.T, cfg api.Config) string {
	t.Helper()
	lim := memory.New(memory.Config{SweepInterval: -1, Shards: 1})
	t.Cleanup(func() { lim.Close() })
	cfg.Limiter = lim
	return strings.TrimPrefix(tooltest.Serve(t, cfg), "http://")
}

// batchBody is a batch of one check, padded with spaces to size bytes.
func batchBody(id string, size int) string {
	b := `[{"id":"` + id + `","scale":60000,"limit":10}]`
	return b + strings.Repeat(" ", size-len(b))
}

func postHead(n int, extra string) string {
	return "POST /check_rates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
		"Content-Length: " + strconv.Itoa(n) + "\r\n\r\n"
}

// TestBodyBudgetRefusesAnnouncedBodies: a body announced bigger than the
// budget can hold now is refused with 503 before it is read and its
// connection closed; a reserved body is read whole however many small
// requests come meanwhile, and once it is answered the budget takes bodies
// again.
func TestBodyBudgetRefusesAnnouncedBodies(t *testing.T) {
	const budget, size = 64 << 10, 40 << 10
	addr := serveTCP(t, api.Config{ConnLimits: api.ConnLimits{BodyBudget: budget}})
	body := batchBody("held", size)

	held, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer held.Close()
	_, err = io.WriteString(held, postHead(size, "")+body[:size/2])
	require.NoError(t, err)

	// The held body's reservation shows in the metric of bytes held once
	// the server has read its head; then a second announced body over
	// what is left gets 503.
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`(?m)^raterlimiter_request_bytes_held (\d+)`).FindStringSubmatch(string(b))
		require.NotNil(t, m, "the metric of bytes held")
		held, _ := strconv.Atoi(m[1])
		return held >= size
	}, 30*time.Second, 10*time.Millisecond, "bounded far above what a busy machine takes")
	var refused *http.Response
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		// fasthttp reads one byte of a big body before the handler sees
		// its head.
		_, err = io.WriteString(c, postHead(size, "")+body[:1])
		require.NoError(t, err)
		// If the held body's head was not read yet, this one got the
		// budget and the server waits for its body: give it up.
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 503 {
			return false
		}
		refused = resp
		// Refused unread: the server closes the connection.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(make([]byte, 1))
		assert.Equal(t, 0, n)
		assert.ErrorIs(t, err, io.EOF)
		return true
	}, 30*time.Second, 50*time.Millisecond, "bounded far above what a busy machine takes")
	assert.Equal(t, "1", refused.Header.Get("Retry-After"))
	assert.True(t, refused.Close, "Connection: close")

	// Small requests are served meanwhile.
	for range 5 {
		resp, err := http.Get("http://" + addr + "/check_rate?id=small&scale=60000&limit=100")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
	}

	// The held body is read whole and answered.
	_, err = io.WriteString(held, body[size/2:])
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(held), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, 200, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"allowed":true`)

	// Answered, it left the budget: the next big body is taken.
	resp, err = http.Post("http://"+addr+"/check_rates", "application/json", strings.NewReader(batchBody("next", size)))
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, string(b))
}

// TestChunkedBodiesAreBounded: a chunked body is read to its end within
// the cap on bodies; past it, 413 and the connection closes.
func TestChunkedBodiesAreBounded(t *testing.T) {
	const maxBody = 32 << 10
	addr := serveTCP(t, api.Config{MaxBodyBytes: maxBody})
	send := func(body string) (int, string) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		req := "POST /check_rates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
		for len(body) > 0 {
			n := min(len(body), 5000)
			req += strconv.FormatInt(int64(n), 16) + "\r\n" + body[:n] + "\r\n"
			body = body[n:]
		}
		req += "0\r\n\r\n"
		go func() { _, _ = io.WriteString(c, req) }()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := send(batchBody("chunked", 20<<10))
	assert.Equal(t, 200, status, body)
	assert.Contains(t, body, `"allowed":true`)
	status, body = send(batchBody("chunked", maxBody+1))
	assert.Equal(t, 413, status, body)
	status, body = send(batchBody("chunked", maxBody))
	assert.Equal(t, 200, status, body)
}

// TestAnnouncedBodyOverTheCap: a Content-Length over the cap gets 413
// once its first byte is sent.
func TestAnnouncedBodyOverTheCap(t *testing.T) {
	addr := serveTCP(t, api.Config{MaxBodyBytes: 32 << 10})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, postHead(32<<10+1, "")+"[")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 413, resp.StatusCode)
	assert.True(t, resp.Close, "Connection: close")
}

// TestEvery503HasRetryAfter: a connection past Concurrency, and /auth with
// no policies, answer 503 with Retry-After.
func TestEvery503HasRetryAfter(t *testing.T) {
	addr := serveTCP(t, api.Config{Concurrency: 2})
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		held = append(held, c)
	}
	// Both held connections are served (the listener has counted them)
	// once each has had an answer.
	for _, c := range held {
		_, err := io.WriteString(c, "GET /check_rate?id=a&scale=1000&limit=9 HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
	}
	// The refusal is written at accept, before any request is read.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode, string(b))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Contains(t, string(b), `"error"`)

	for _, c := range held {
		c.Close()
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/auth")
		if err != nil {
			return false // refused at accept: still past Concurrency
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "1" {
			return false // still past Concurrency: the held connections are being let go
		}
		assert.Equal(t, "60", resp.Header.Get("Retry-After"), "/auth without policies")
		return true
	}, 5*time.Second, 20*time.Millisecond)
}
