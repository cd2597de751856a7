package rls

import (
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// responseMetadata is an answer's dynamic_metadata with
// Options.ResponseMetadata, as envoyproxy/ratelimit writes it: "domain";
// "descriptors", each {"entries": ["key=value", ...]} with "limit" for a
// limit override ("requests_per_unit:N unit:UNIT") and "hitsAddend" when
// the descriptor sets its own; "hitsAddend" when the request sets it;
// "quotaModeViolations", the indexes of the descriptors over a quota-mode
// limit, when there are any; and "quotaModeEnabled", whether a rule the
// request reached has quota_mode: true. Envoy's rate limit filter puts it
// in the request's dynamic metadata (namespace
// envoy.filters.http.ratelimit), for the access log or a later filter.
func responseMetadata(req *rlspb.RateLimitRequest, rules []*Rule, violations []int) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.Domain)}
	ds := make([]*structpb.Value, 0, len(req.Descriptors))
	for _, d := range req.Descriptors {
		entries := make([]*structpb.Value, len(d.Entries))
		for i, e := range d.Entries {
			entries[i] = structpb.NewStringValue(e.Key + "=" + e.Value)
		}
		f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if d.Limit != nil {
			f["limit"] = structpb.NewStringValue("requests_per_unit:" + strconv.FormatUint(uint64(d.Limit.RequestsPerUnit), 10) +
				" unit:" + d.Limit.Unit.String())
		}
		if d.HitsAddend != nil {
			f["hitsAddend"] = structpb.NewNumberValue(float64(d.HitsAddend.Value))
		}
		ds = append(ds, structpb.NewStructValue(&structpb.Struct{Fields: f}))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: ds})
	if req.HitsAddend != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(req.HitsAddend))
	}
	if len(violations) > 0 {
		vs := make([]*structpb.Value, len(violations))
		for i, v := range violations {
			vs[i] = structpb.NewNumberValue(float64(v))
		}
		fields["quotaModeViolations"] = structpb.NewListValue(&structpb.ListValue{Values: vs})
	}
	enabled := false
	for _, r := range rules {
		if r != nil && !r.Unlimited && r.Quota {
			enabled = true
			break
		}
	}
	fields["quotaModeEnabled"] = structpb.NewBoolValue(enabled)
	return &structpb.Struct{Fields: fields}
}

// limitHeaders are an answer's response headers with
// Options.ResponseHeaders, as envoyproxy/ratelimit picks and writes them:
// of the descriptor nearest its limit (the least limit_remaining among
// those with a limit, the first of equals; the last one over its limit
// when one is, quota mode's excepted), RateLimit-Limit its
// requests_per_unit, RateLimit-Remaining its limit_remaining and
// RateLimit-Reset the seconds to the end of its window. None when no
// descriptor has a limit. results[j] decided statuses[at[j]].
func limitHeaders(statuses []*rlspb.RateLimitResponse_DescriptorStatus, results []policy.Result, at []int) []*corev3.HeaderValue {
	best, remaining := -1, uint32(math.MaxUint32)
	for j, i := range at {
		st := statuses[i]
		switch {
		case st.Code == rlspb.RateLimitResponse_OVER_LIMIT:
			best, remaining = j, 0
		case st.LimitRemaining < remaining:
			best, remaining = j, st.LimitRemaining
		}
	}
	if best < 0 {
		return nil
	}
	st, reset := statuses[at[best]], results[best].Decision.Reset
	return []*corev3.HeaderValue{
		{Key: "RateLimit-Limit", Value: strconv.FormatUint(uint64(st.CurrentLimit.RequestsPerUnit), 10)},
		{Key: "RateLimit-Remaining", Value: strconv.FormatUint(uint64(remaining), 10)},
		{Key: "RateLimit-Reset", Value: strconv.FormatInt(int64((max(reset, 0)+time.Second-1)/time.Second), 10)},
	}
}
