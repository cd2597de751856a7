package rls

import (
	"strconv"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
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
