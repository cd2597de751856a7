package rls

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeConn is a connection from addr whose reads come from in; what is
// written goes nowhere.
type fakeConn struct {
	addr   *net.TCPAddr
	mu     sync.Mutex
	in     bytes.Buffer
	closed bool
}

func from(ip string) *fakeConn {
	return &fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
}

func (c *fakeConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.in.Read(p)
}
func (c *fakeConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
func (c *fakeConn) isClosed() bool                   { c.mu.Lock(); defer c.mu.Unlock(); return c.closed }
func (c *fakeConn) LocalAddr() net.Addr              { return c.addr }
func (c *fakeConn) RemoteAddr() net.Addr             { return c.addr }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

// admitted admits c and has it send the client preface and what follows.
func admitted(t *testing.T, g *Guard, c *fakeConn, wire ...[]byte) *guardConn {
	t.Helper()
	gc, victim := g.admit(c)
	require.NotNil(t, gc, "%v admitted", c.addr)
	if victim != nil {
		victim.cut()
	}
	c.in.WriteString(clientPreface)
	for _, w := range wire {
		c.in.Write(w)
	}
	buf := make([]byte, 4096)
	for c.in.Len() > 0 {
		_, err := gc.Read(buf)
		require.NoError(t, err)
	}
	return gc
}

// TestIdleLongestGivesWay: past -rls-max-conns a new connection takes the
// place of the one idle longest; a connection with a call in flight never
// gives way, and with every one busy the new one is refused.
func TestIdleLongestGivesWay(t *testing.T) {
	g := NewGuard(Limits{MaxConns: 3})
	a := from("10.0.0.1")
	admitted(t, g, a)
	b := from("10.0.0.2")
	gB := admitted(t, g, b, frame(frameHeaders, 0, 1, nil)) // a call in flight
	c := from("10.0.0.3")
	admitted(t, g, c)

	d := from("10.0.0.4")
	admitted(t, g, d)
	assert.True(t, a.isClosed(), "the connection idle longest gave way")
	assert.False(t, b.isClosed() || c.isClosed())

	// b's call ends (its trailers are written): b is now idle, and the
	// idle longest is c, which fell idle at its accept.
	_, err := gB.Write(frame(frameHeaders, flagEndStream, 1, []byte{1, 2, 3}))
	require.NoError(t, err)
	admitted(t, g, from("10.0.0.5"))
	assert.True(t, c.isClosed(), "c was idle since before b's call ended")
	assert.False(t, b.isClosed())

	// Every connection busy: the new one is refused.
	g = NewGuard(Limits{MaxConns: 2})
	for i, ip := range []string{"10.0.1.1", "10.0.1.2"} {
		admitted(t, g, from(ip), frame(frameHeaders, 0, uint32(2*i+1), nil))
	}
	gc, victim := g.admit(from("10.0.1.3"))
	assert.Nil(t, gc)
	assert.Nil(t, victim)
}

// TestAnAddressAtItsBoundGivesWayItself: past -rls-max-conns-per-ip an
// address's new connection takes the place of that address's idle longest,
// never of another address's.
func TestAnAddressAtItsBoundGivesWayItself(t *testing.T) {
	g := NewGuard(Limits{MaxConnsPerIP: 2, MaxConns: 3})
	other := from("10.0.0.9")
	admitted(t, g, other)
	first := from("10.0.0.1")
	admitted(t, g, first)
	second := from("10.0.0.1")
	admitted(t, g, second)
	admitted(t, g, from("10.0.0.1"))
	assert.True(t, first.isClosed())
	assert.False(t, other.isClosed() || second.isClosed())
}

// TestHandshakesHaveABudgetPerAddress: an address's connections still in
// their handshake are bounded on their own; one whose preface is read
// leaves the budget, and another address is never refused for them.
func TestHandshakesHaveABudgetPerAddress(t *testing.T) {
	g := NewGuard(Limits{})
	var stalled []*guardConn
	for range MaxHandshakesPerIP {
		gc, _ := g.admit(from("10.0.0.1"))
		require.NotNil(t, gc)
		stalled = append(stalled, gc)
	}
	gc, _ := g.admit(from("10.0.0.1"))
	assert.Nil(t, gc, "one handshake more from one address is refused")
	admitted(t, g, from("10.0.0.2"))

	// One finishes its handshake: room for another.
	stalled[0].Conn.(*fakeConn).in.WriteString(clientPreface)
	_, err := stalled[0].Read(make([]byte, 64))
	require.NoError(t, err)
	gc, _ = g.admit(from("10.0.0.1"))
	assert.NotNil(t, gc)
	// One closed in its handshake: room for another.
	require.NoError(t, stalled[1].Close())
	gc, _ = g.admit(from("10.0.0.1"))
	assert.NotNil(t, gc)
}

// TestCallsInFlight: a call is in flight from the client's HEADERS until
// the server's trailers or a reset from either side, counted once whatever
// comes after; the frames are read across any split of the bytes.
func TestCallsInFlight(t *testing.T) {
	g := NewGuard(Limits{})
	gc := admitted(t, g, from("10.0.0.1"),
		frame(frameHeaders, 0, 1, []byte("h")), frame(frameData, flagEndStream, 1, grpcMessage(1, []byte{7})),
		frame(frameHeaders, 0, 3, nil), frame(frameHeaders, 0, 5, nil))
	assert.Equal(t, int32(3), gc.inflight.Load())

	written := append(frame(0x4, 0, 0, make([]byte, 6)), frame(frameHeaders, 0, 1, []byte("resp"))...)
	written = append(written, frame(frameData, 0, 1, make([]byte, 40))...)
	written = append(written, frame(frameHeaders, flagEndStream, 1, []byte("trailers"))...)
	written = append(written, frame(frameRSTStream, 0, 3, []byte{0, 0, 0, 7})...)
	for _, b := range written { // a byte at a time
		_, err := gc.Write([]byte{b})
		require.NoError(t, err)
	}
	assert.Equal(t, int32(1), gc.inflight.Load(), "stream 5 is left")
	mark := gc.idle.Load()

	// The client resets 1 (answered already) and 5: 5 ends, once.
	gc.Conn.(*fakeConn).in.Write(append(frame(frameRSTStream, 0, 1, []byte{0, 0, 0, 8}), frame(frameRSTStream, 0, 5, []byte{0, 0, 0, 8})...))
	_, err := gc.Read(make([]byte, 64))
	require.NoError(t, err)
	assert.Zero(t, gc.inflight.Load())
	assert.Greater(t, gc.idle.Load(), mark, "idle from the last call's end")
	_, err = gc.Write(frame(frameHeaders, flagEndStream, 5, nil))
	require.NoError(t, err)
	assert.Zero(t, gc.inflight.Load())
}
