package rls

import (
	"encoding/binary"
	"time"
)

// clientPreface starts every HTTP/2 connection (RFC 9113, 3.4).
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HTTP/2 frame types and flags the meter reads (RFC 9113, 6).
const (
	frameData      = 0x0
	frameHeaders   = 0x1
	frameRSTStream = 0x3
	flagEndStream  = 0x1
	flagPadded     = 0x8
)

// meter follows the frames a client sends far enough to know pending: the
// bytes of gRPC requests begun on the connection and not yet whole. It
// reads each frame's 9-byte header and, in DATA frames, each message's
// 5-byte prefix (its length); grpc-go parses the same bytes afterwards.
// The zero value with a streams map is ready; it is not safe for
// concurrent use (a connection has one reader).
type meter struct {
	preface int // bytes of the client preface read
	hdr     [9]byte
	hdrN    int
	typ     byte
	flags   byte
	id      uint32
	left    int  // payload bytes of the frame not yet read
	padByte bool // a PADDED DATA frame's pad length is still to read
	data    int  // message bytes of the DATA frame not yet read
	streams map[uint32]*message
	pending int64
	checked time.Time // when streams was last cleared of stale ones
	// maxStreams bounds the streams followed at once (0: no bound). A
	// client has at most the server's MaxStreams open; one sending
	// request bytes on more (streams it never opened, which grpc-go drops
	// unread) sets overflow, and its connection is closed.
	maxStreams int
	overflow   bool
	// opened and reset are the streams the client opened (HEADERS on a
	// stream id above every one before) and reset (RST_STREAM) in the
	// bytes read since the caller last emptied them.
	opened, reset []uint32
	lastOpened    uint32
}

// prefaced reports whether the client preface has been read: the
// connection's handshake, TLS included, is over.
func (m *meter) prefaced() bool { return m.preface == len(clientPreface) }

// message is a stream's request being read.
type message struct {
	prefix  [5]byte
	prefixN int
	left    int   // body bytes not yet read, once the prefix is whole
	held    int64 // bytes of the message read (prefix and body)
	since   time.Time
}

// read meters p, the next bytes the client sent. A stream whose request
// has not grown whole within stale of its first byte has been ended by the
// server (the receive timeout): it is dropped from the count.
func (m *meter) read(p []byte, now time.Time, stale time.Duration) {
	if m.preface < len(clientPreface) {
		n := min(len(clientPreface)-m.preface, len(p))
		m.preface, p = m.preface+n, p[n:]
	}
	for len(p) > 0 {
		if m.hdrN < len(m.hdr) {
			n := copy(m.hdr[m.hdrN:], p)
			m.hdrN, p = m.hdrN+n, p[n:]
			if m.hdrN < len(m.hdr) {
				break
			}
			m.begin(now)
			continue
		}
		n := min(m.left, len(p))
		if m.typ == frameData {
			m.dataBytes(p[:n], now)
		}
		m.left, p = m.left-n, p[n:]
		if m.left == 0 {
			m.end()
		}
	}
	if now.Sub(m.checked) > stale {
		m.checked = now
		for id, s := range m.streams {
			if now.Sub(s.since) > stale {
				m.pending -= s.held
				delete(m.streams, id)
			}
		}
	}
}

// begin starts the frame whose header is read.
func (m *meter) begin(now time.Time) {
	h := m.hdr[:]
	m.left = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	m.typ, m.flags = h[3], h[4]
	m.id = binary.BigEndian.Uint32(h[5:]) & (1<<31 - 1)
	switch m.typ {
	case frameData:
		m.padByte = m.flags&flagPadded != 0
		m.data = m.left
	case frameHeaders:
		if m.id > m.lastOpened {
			m.lastOpened = m.id
			m.opened = append(m.opened, m.id)
		}
	case frameRSTStream:
		m.close(m.id)
		m.reset = append(m.reset, m.id)
	}
	if m.left == 0 {
		m.end()
	}
}

// end finishes the frame: one that ends its stream ends its request.
func (m *meter) end() {
	if (m.typ == frameData || m.typ == frameHeaders) && m.flags&flagEndStream != 0 {
		m.close(m.id)
	}
	m.hdrN = 0
}

func (m *meter) close(id uint32) {
	if s, ok := m.streams[id]; ok {
		m.pending -= s.held
		delete(m.streams, id)
	}
}

// dataBytes meters payload bytes of a DATA frame: the pad length, the
// messages, the padding.
func (m *meter) dataBytes(p []byte, now time.Time) {
	if m.padByte && len(p) > 0 {
		m.padByte = false
		m.data = max(0, m.left-1-int(p[0]))
		p = p[1:]
	}
	n := min(m.data, len(p))
	m.data -= n
	if n == 0 {
		return
	}
	// A stream is followed from its first request byte, never for an
	// empty frame: empty DATA frames on fresh stream ids cost a client 9
	// bytes each and would otherwise each leave an entry here.
	s := m.streams[m.id]
	if s == nil {
		if m.maxStreams > 0 && len(m.streams) >= m.maxStreams {
			m.overflow = true
			return
		}
		s = &message{since: now}
		m.streams[m.id] = s
	}
	for b := p[:n]; len(b) > 0; {
		if s.prefixN < len(s.prefix) {
			if s.prefixN == 0 {
				s.since = now
			}
			k := copy(s.prefix[s.prefixN:], b)
			s.prefixN, b = s.prefixN+k, b[k:]
			s.held += int64(k)
			m.pending += int64(k)
			if s.prefixN == len(s.prefix) {
				s.left = int(binary.BigEndian.Uint32(s.prefix[1:]))
			}
		} else {
			k := min(s.left, len(b))
			s.left, b = s.left-k, b[k:]
			s.held += int64(k)
			m.pending += int64(k)
		}
		if s.prefixN == len(s.prefix) && s.left == 0 { // whole
			m.pending -= s.held
			s.held, s.prefixN = 0, 0
		}
	}
}

// frameHeads reads the frame headers of what the server writes, far enough
// to see the streams it ends: HEADERS or DATA with END_STREAM (a call's
// trailers), and RST_STREAM. The zero value is ready after the server's
// first byte (the server sends no preface but its frames); it is not safe
// for concurrent use.
type frameHeads struct {
	hdr  [9]byte
	hdrN int
	left int // payload bytes of the frame not yet written
}

// scan reads p, the next bytes written, and appends to ended the streams
// its frames end.
func (f *frameHeads) scan(p []byte, ended []uint32) []uint32 {
	for len(p) > 0 {
		if f.left > 0 {
			n := min(f.left, len(p))
			f.left, p = f.left-n, p[n:]
			continue
		}
		n := copy(f.hdr[f.hdrN:], p)
		f.hdrN, p = f.hdrN+n, p[n:]
		if f.hdrN < len(f.hdr) {
			break
		}
		f.hdrN = 0
		h := f.hdr[:]
		f.left = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags, id := h[3], h[4], binary.BigEndian.Uint32(h[5:])&(1<<31-1)
		if typ == frameRSTStream || (typ == frameHeaders || typ == frameData) && flags&flagEndStream != 0 {
			ended = append(ended, id)
		}
	}
	return ended
}
