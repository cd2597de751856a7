package api

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadlineConn records the deadlines its socket is given.
type deadlineConn struct {
	net.Conn
	mu          sync.Mutex
	read, write time.Time
	sets        int
}

func (d *deadlineConn) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.read, d.sets = t, d.sets+1
	return nil
}

func (d *deadlineConn) SetWriteDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.write, d.sets = t, d.sets+1
	return nil
}

func (d *deadlineConn) socket(read bool) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if read {
		return d.read
	}
	return d.write
}

// lazyConn is a started limitConn on a deadlineConn, watched by a watchdog
// on the clock now (Unix ns) that the test calls itself.
func lazyConn(tick time.Duration, now *atomic.Int64) (*limitConn, *deadlineConn, *watchdog) {
	w := newWatchdog(tick, func() time.Time { return time.Unix(0, now.Load()) })
	sock := &deadlineConn{}
	c := &limitConn{Conn: sock, l: &limitListener{watch: w}}
	c.started.Store(true)
	w.add(c)
	return c, sock, w
}

// TestLazyDeadlinesArmWhatIsDueSoon: a deadline within the horizon goes on
// the socket when asked; a later one only when a tick finds it near; a
// deadline asked for instead of an armed one replaces it (or clears it, if
// it is far); once the watchdog stops, every deadline goes on the socket.
func TestLazyDeadlinesArmWhatIsDueSoon(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Unix(1_700_000_000, 0).UnixNano())
	const tick = 10 * time.Millisecond
	c, sock, w := lazyConn(tick, &now)
	at := func(d time.Duration) time.Time { return time.Unix(0, now.Load()).Add(d) }

	near := at(2 * tick)
	require.NoError(t, c.SetWriteDeadline(near))
	assert.Equal(t, near, sock.socket(false), "due within the horizon: armed at once")

	far := at(time.Second)
	require.NoError(t, c.SetReadDeadline(far))
	require.NoError(t, c.SetWriteDeadline(far))
	assert.True(t, sock.socket(true).IsZero(), "far: not armed")
	assert.True(t, sock.socket(false).IsZero(), "far, instead of an armed one: the socket's is cleared")
	sets := sock.sets

	w.sweep()
	assert.Equal(t, sets, sock.sets, "a tick far from both deadlines arms nothing")
	now.Add(int64(time.Second - 3*tick))
	w.sweep()
	assert.Equal(t, far, sock.socket(true), "the tick within the horizon arms it")
	assert.Equal(t, far, sock.socket(false))

	later := at(time.Minute)
	require.NoError(t, c.SetReadDeadline(later))
	assert.True(t, sock.socket(true).IsZero(), "the armed deadline gave way to a far one")
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	assert.True(t, sock.socket(true).IsZero())

	require.NoError(t, c.SetReadDeadline(later))
	w.close()
	assert.Equal(t, later, sock.socket(true), "a stopped watchdog arms every deadline wanted")
	latest := at(time.Hour)
	require.NoError(t, c.SetWriteDeadline(latest))
	assert.Equal(t, latest, sock.socket(false), "and the connection arms its own from then on")
}

// TestLazyDeadlinesNeverKeepAStaleOne races a connection that keeps asking
// for deadlines (none, near, far) against a watchdog ticking on a clock
// that moves: after each change, the socket holds either no deadline or
// the one asked for last, never an earlier one (which would cut a request
// off early).
func TestLazyDeadlinesNeverKeepAStaleOne(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const tick = time.Millisecond
	var now atomic.Int64
	now.Store(time.Unix(1_700_000_000, 0).UnixNano())
	c, sock, w := lazyConn(tick, &now)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		r := rand.New(rand.NewPCG(seed, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			now.Add(r.Int64N(int64(2 * tick)))
			w.sweep()
		}
	})
	r := rand.New(rand.NewPCG(seed, 2))
	for i := range 20000 {
		read := r.IntN(2) == 0
		var want time.Time
		switch r.IntN(3) {
		case 1:
			want = time.Unix(0, now.Load()).Add(time.Duration(r.Int64N(int64(4 * tick))))
		case 2:
			want = time.Unix(0, now.Load()).Add(time.Duration(r.Int64N(int64(100 * tick))))
		}
		if read {
			require.NoError(t, c.SetReadDeadline(want))
		} else {
			require.NoError(t, c.SetWriteDeadline(want))
		}
		c.mu.Lock() // the watchdog is not half-way through arming
		for _, rd := range []bool{true, false} {
			d := c.deadline(rd)
			got, armed, wanted := sock.socket(rd), d.armed.Load(), d.want.Load()
			if !assert.Equal(t, fromUnixNano(armed), got, "change %d: armed says what the socket has", i) ||
				!assert.True(t, armed == 0 || armed == wanted, "change %d (read %v): the socket has %v, %v was asked for", i, rd, got, fromUnixNano(wanted)) {
				c.mu.Unlock()
				close(stop)
				wg.Wait()
				return
			}
		}
		c.mu.Unlock()
	}
	close(stop)
	wg.Wait()
}

// TestLazyDeadlineEndsARead: on a real socket, a read deadline asked far
// beyond the horizon is armed by the watchdog, and the blocked read ends.
func TestLazyDeadlineEndsARead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(ln, ConnLimits{PerIP: -1, FirstByteTimeout: time.Minute, BodyBudget: -1}, 16, new(byteCount), nil, nil, time.Millisecond)
	defer l.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	sc, err := l.Accept()
	require.NoError(t, err)
	defer sc.Close()
	_, err = client.Write([]byte("x"))
	require.NoError(t, err)
	buf := make([]byte, 1)
	_, err = sc.Read(buf) // the first byte: the server's deadlines from now on
	require.NoError(t, err)
	require.NoError(t, sc.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	assert.Zero(t, sc.(*limitConn).rd.armed.Load(), "beyond the horizon of 4 ms: not armed yet")
	done := make(chan error, 1)
	go func() {
		_, err := sc.Read(buf)
		done <- err
	}()
	select {
	case err := <-done:
		var ne net.Error
		require.ErrorAs(t, err, &ne)
		assert.True(t, ne.Timeout(), "%v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the read deadline was never armed")
	}
}
