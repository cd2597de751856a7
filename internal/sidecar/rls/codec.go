package rls

import (
	"context"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Register registers s on g as the RateLimitService. Unlike
// rlspb.RegisterRateLimitServiceServer, its calls take their requests from
// a pool, and with CodecOption among g's options a request of the usual
// shape is decoded into the pooled one without allocating per descriptor.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	desc := rlspb.RateLimitService_ServiceDesc
	desc.Methods = []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: s.handle}}
	g.RegisterService(&desc, s)
}

// handle is ShouldRateLimit's gRPC handler, as the generated one but for
// the pooled request and no closures made per call.
func (s *Server) handle(_ any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
	req := s.requests.Get().(*rlspb.RateLimitRequest)
	defer func() {
		if cap(req.Descriptors) <= s.maxDescriptors { // a refused request's bulk is not kept
			s.requests.Put(req)
		}
	}()
	if err := dec(req); err != nil {
		return nil, err
	}
	if intercept == nil {
		return s.ShouldRateLimit(ctx, req)
	}
	return intercept(ctx, req, s.info, s.unary)
}

// CodecOption is the grpc.Server option that decodes Register's requests
// with decodeRequest; every other message goes to grpc-go's proto codec,
// which also encodes every answer.
func CodecOption() grpc.ServerOption {
	return grpc.ForceServerCodecV2(codec{encoding.GetCodecV2("proto")})
}

type codec struct{ encoding.CodecV2 }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if req, ok := v.(*rlspb.RateLimitRequest); ok {
		var b []byte
		if len(data) == 1 {
			b = data[0].ReadOnlyData()
		} else {
			b = data.Materialize()
		}
		if decodeRequest(b, req) {
			return nil
		}
	}
	return c.CodecV2.Unmarshal(data, v)
}

// Field numbers of the messages decodeRequest reads (rls.proto,
// ratelimit.proto).
const (
	fieldDomain      = 1 // RateLimitRequest
	fieldDescriptors = 2
	fieldHitsAddend  = 3
	fieldEntries     = 1 // RateLimitDescriptor
	fieldKey         = 1 // RateLimitDescriptor.Entry
	fieldValue       = 2
)

// decodeRequest decodes b into req when b holds only what Envoy's filter
// sends in the common case: the domain, descriptors of entries and the
// request's hits_addend. It reuses req's descriptors and entries, and
// every string of the request is a piece of one copy of b. It reports
// false on anything else (a limit override, a descriptor's own
// hits_addend, an unknown field, a string that is not UTF-8, malformed
// bytes), which the proto codec then decodes, or refuses, as before.
func decodeRequest(b []byte, req *rlspb.RateLimitRequest) bool {
	all := string(b)
	ds := req.Descriptors[:0]
	req.Reset()
	for i := 0; i < len(b); {
		if num, typ, n := protowire.ConsumeTag(b[i:]); num == fieldHitsAddend && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b[i+n:])
			if m < 0 {
				return false
			}
			i, req.HitsAddend = i+n+m, uint32(v)
			continue
		}
		num, start, end, ok := bytesField(b, i)
		if !ok {
			return false
		}
		i = end
		switch num {
		case fieldDomain:
			if req.Domain = all[start:end]; !utf8.ValidString(req.Domain) {
				return false
			}
		case fieldDescriptors:
			d := next(&ds)
			es := d.Entries[:0]
			d.Reset()
			for j := start; j < end; {
				num, s, e, ok := bytesField(b[:end], j)
				if !ok || num != fieldEntries || !decodeEntry(b[:e], s, all, next(&es)) {
					return false
				}
				j = e
			}
			d.Entries = es
		default:
			return false
		}
	}
	req.Descriptors = ds
	return true
}

// decodeEntry decodes the entry in b[i:] into e.
func decodeEntry(b []byte, i int, all string, e *ratelimitv3.RateLimitDescriptor_Entry) bool {
	e.Reset()
	for i < len(b) {
		num, start, end, ok := bytesField(b, i)
		if !ok || !utf8.ValidString(all[start:end]) {
			return false
		}
		switch num {
		case fieldKey:
			e.Key = all[start:end]
		case fieldValue:
			e.Value = all[start:end]
		default:
			return false
		}
		i = end
	}
	return true
}

// bytesField reads the length-delimited field at b[i:]: its number and
// the bounds of its bytes in b. It reports false for a field of another
// type or one that does not fit in b.
func bytesField(b []byte, i int) (num protowire.Number, start, end int, ok bool) {
	num, typ, n := protowire.ConsumeTag(b[i:])
	if n < 0 || typ != protowire.BytesType {
		return 0, 0, 0, false
	}
	v, m := protowire.ConsumeBytes(b[i+n:])
	if m < 0 {
		return 0, 0, 0, false
	}
	end = i + n + m
	return num, end - len(v), end, true
}

// next lengthens *s by one and returns its new last element: the one its
// capacity held, or a new one.
func next[T any, P interface{ *T }](s *[]P) P {
	if len(*s) < cap(*s) {
		*s = (*s)[:len(*s)+1]
		if p := (*s)[len(*s)-1]; p != nil {
			return p
		}
	} else {
		*s = append(*s, nil)
	}
	p := P(new(T))
	(*s)[len(*s)-1] = p
	return p
}
