package rls

import (
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// decodeCases are requests of the shape decodeRequest decodes itself.
var decodeCases = []struct {
	name string
	req  *rlspb.RateLimitRequest
}{
	{"one descriptor", &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("user", "user-1")}}},
	{"three descriptors, hits", &rlspb.RateLimitRequest{Domain: "edge", HitsAddend: 7, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		entries("remote_address", "10.0.0.1", "path", "/a"), entries("generic_key", ""), entries("k", "välue ✓", "k2", "v2", "k3", "v3")}}},
	{"no domain", &rlspb.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("a", "b")}}},
	{"empty", &rlspb.RateLimitRequest{}},
	{"a descriptor without entries", &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}, entries("a", "")}}},
}

// TestDecodeRequestIsProtos: what decodeRequest decodes equals what
// proto.Unmarshal makes of the same bytes, into a request reused from a
// larger one (as the pool hands them out).
func TestDecodeRequestIsProtos(t *testing.T) {
	req := &rlspb.RateLimitRequest{}
	big, _ := proto.Marshal(decodeCases[1].req)
	if !decodeRequest(big, req) {
		t.Fatal("decodeRequest refused the three descriptors")
	}
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if !decodeRequest(b, req) {
				t.Fatalf("decodeRequest refused %v", tc.req)
			}
			want := &rlspb.RateLimitRequest{}
			if err := proto.Unmarshal(b, want); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(req, want) {
				t.Errorf("decoded %v; proto.Unmarshal %v", req, want)
			}
		})
	}
}

// TestCodecLeavesTheRestToProto: what decodeRequest does not decode itself
// the proto codec does, as grpc-go's default codec would, errors included.
func TestCodecLeavesTheRestToProto(t *testing.T) {
	override := entries("a", "b")
	override.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 1}
	own := entries("a", "b")
	own.HitsAddend = wrapperspb.UInt64(3)
	unknown, _ := proto.Marshal(&rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("a", "b")}})
	unknown = protowire.AppendVarint(protowire.AppendTag(unknown, 9, protowire.VarintType), 1)
	badUTF8 := protowire.AppendString(protowire.AppendTag(nil, fieldDomain, protowire.BytesType), "\xff")
	cases := []struct {
		name string
		b    []byte
	}{
		{"limit override", mustMarshal(t, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{override}})},
		{"descriptor's hits_addend", mustMarshal(t, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{own}})},
		{"unknown field", unknown},
		{"domain not UTF-8", badUTF8},
		{"cut short", unknown[:len(unknown)-4]},
	}
	c := codec{encoding.GetCodecV2("proto")}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if decodeRequest(tc.b, &rlspb.RateLimitRequest{}) {
				t.Error("decodeRequest decoded it itself")
			}
			got, want := &rlspb.RateLimitRequest{}, &rlspb.RateLimitRequest{}
			err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.b)}, got)
			wantErr := proto.Unmarshal(tc.b, want)
			if (err == nil) != (wantErr == nil) || !proto.Equal(got, want) {
				t.Errorf("codec: %v, %v; proto: %v, %v", got, err, want, wantErr)
			}
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeRequest: whatever decodeRequest accepts, proto.Unmarshal
// accepts too and decodes the same.
func FuzzDecodeRequest(f *testing.F) {
	for _, tc := range decodeCases {
		b, _ := proto.Marshal(tc.req)
		f.Add(b)
	}
	req := &rlspb.RateLimitRequest{}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !decodeRequest(b, req) {
			return
		}
		want := &rlspb.RateLimitRequest{}
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatalf("decodeRequest decoded %x, which proto.Unmarshal refuses: %v", b, err)
		}
		if !proto.Equal(req, want) {
			t.Fatalf("%x: decoded %v; proto.Unmarshal %v", b, req, want)
		}
	})
}
