package rls

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// frame is an HTTP/2 frame as a client writes it.
func frame(typ, flags byte, id uint32, payload []byte) []byte {
	b := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[5:], id)
	return append(b, payload...)
}

// grpcMessage is a message's 5-byte prefix announcing n bytes, and body.
func grpcMessage(n int, body []byte) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(n))
	return append(b, body...)
}

// TestMeterCountsUnfinishedRequests: whatever the reads' sizes, the meter
// counts the bytes of requests begun and not whole, and forgets a request
// once it is whole, its stream ends or is reset, or it is stale.
func TestMeterCountsUnfinishedRequests(t *testing.T) {
	whole := frame(frameData, flagEndStream, 1, grpcMessage(3, []byte("abc")))
	stalled := frame(frameData, 0, 3, grpcMessage(1000, make([]byte, 600)))
	padded := frame(frameData, flagPadded, 5, append(append([]byte{4}, grpcMessage(100, make([]byte, 10))...), 9, 9, 9, 9))
	tests := []struct {
		name    string
		wire    []byte
		pending int64
	}{
		{"a whole request", whole, 0},
		{"a request stalled 395 bytes short", stalled, 605},
		{"padding is not the request's", padded, 15},
		{"a reset stream's request is dropped", append(append([]byte{}, stalled...), frame(frameRSTStream, 0, 3, []byte{0, 0, 0, 8})...), 0},
		{"headers ending the stream end its request", append(append([]byte{}, stalled...), frame(frameHeaders, flagEndStream, 3, nil)...), 0},
		{"other frames are not requests", append(frame(0x4, 0, 0, make([]byte, 6)), stalled...), 605},
	}
	t0 := time.Unix(1000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire := append([]byte(clientPreface), tt.wire...)
			for step := 1; step <= len(wire); step++ {
				m := meter{streams: map[uint32]*message{}, checked: t0}
				for i := 0; i < len(wire); i += step {
					m.read(wire[i:min(i+step, len(wire))], t0, time.Second)
				}
				if !assert.Equal(t, tt.pending, m.pending, "reads of %d bytes", step) {
					return
				}
			}
		})
	}
	m := meter{streams: map[uint32]*message{}, checked: t0}
	m.read(append([]byte(clientPreface), stalled...), t0, time.Second)
	m.read(frame(0x6, 0, 0, make([]byte, 8)), t0.Add(2*time.Second), time.Second)
	assert.Zero(t, m.pending, "a request unfinished past the receive timeout was ended by the server")
}

// TestMeterFollowsOnlyStreamsThatCarryRequests: empty DATA frames on fresh
// stream ids (grpc-go drops them unread) leave nothing behind, and request
// bytes on more streams than a connection may have open overflow the meter,
// whose connection is then closed.
func TestMeterFollowsOnlyStreamsThatCarryRequests(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := meter{streams: map[uint32]*message{}, checked: t0, maxStreams: trackedStreams(100)}
	m.read([]byte(clientPreface), t0, time.Second)
	var wire []byte
	for id := uint32(1); id < 200_000; id += 2 {
		wire = append(wire, frame(frameData, 0, id, nil)...)
		wire = append(wire, frame(frameData, flagPadded, id, []byte{0})...) // a pad length, no message byte
	}
	m.read(wire, t0, time.Second)
	assert.Zero(t, len(m.streams), "no stream is followed for frames without request bytes")
	assert.False(t, m.overflow)

	for id := uint32(1); id <= 2*uint32(trackedStreams(100))+1; id += 2 { // one more than followed
		m.read(frame(frameData, 0, id, []byte{0}), t0, time.Second)
	}
	assert.True(t, m.overflow, "request bytes on %d streams", trackedStreams(100))
	assert.Len(t, m.streams, trackedStreams(100), "the streams followed stay bounded")
}
