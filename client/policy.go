package client

import (
	"context"
	"net/url"
	"strconv"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// CheckPolicy asks the sidecar whether id may make hits more requests under
// the sidecar's policy named policy (GET /check_rate?policy=&id=&hits=): the
// policy, not the caller, sets the algorithm, limit and scale, as with a
// sidecar run with -policies-only. hits 0 means the policy's own hits per
// request. It returns the decision and the request as the policy made it
// (its scale, limit and algo, and its slices or queue, for the RateLimit
// headers). An unknown policy,
// an empty or too long id fail with an error matching
// raterlimiter.ErrInvalid. The fail mode applies as for CheckRate; failing
// open, the decision allows with no counts.
func (c *Client) CheckPolicy(ctx context.Context, policy, id string, hits int64) (rl.Decision, rl.Request, error) {
	r := rl.Request{ID: id, Hits: hits}
	switch {
	case c.hc == nil:
		return rl.Decision{}, r, errNotNew
	case policy == "":
		return rl.Decision{}, r, &rl.FieldError{Field: "policy", Rule: "must not be empty"}
	}
	// The id and hits keep a check's bounds, refused in the HTTP API's words.
	if err := check.ValidateWire(rl.Request{ID: id, Scale: time.Millisecond, Hits: hits}, c.cfg.MaxIDBytes); err != nil {
		return rl.Decision{}, r, err
	}
	u := make([]byte, 0, len(c.base)+len("/check_rate?policy=&id=&hits=")+len(policy)+3*len(id)+20)
	u = append(u, c.base...)
	u = append(u, "/check_rate?policy="...)
	u = append(u, url.QueryEscape(policy)...)
	u = append(u, "&id="...)
	u = append(u, url.QueryEscape(id)...)
	if hits > 0 {
		u = append(u, "&hits="...)
		u = strconv.AppendInt(u, hits, 10)
	}
	var d rl.Decision
	err := c.do(ctx, fasthttp.MethodGet, string(u), nil, false, func(status int, body []byte, _ *fasthttp.ResponseHeader) error {
		if err := decodeDecision(status, body, &d); err != nil {
			return err
		}
		var p struct {
			Scale  int64          `json:"scale"`
			Algo   check.AlgoName `json:"algo"`
			Slices int64          `json:"slices"`
			Queue  int64          `json:"queue"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return err
		}
		r.Scale, r.Algo, r.Slices, r.Queue = millis.Duration(p.Scale), rl.Algo(p.Algo), p.Slices, p.Queue
		return nil
	})
	d.Now = c.cfg.Clock()
	r.Limit = d.Limit
	if err != nil {
		if c.failOpen(ctx, err, 1) {
			return c.openDecision(r), r, nil
		}
		return rl.Decision{}, r, err
	}
	return d, r, nil
}
