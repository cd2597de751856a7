package policy

import (
	"errors"
	"strings"

	"go.yaml.in/yaml/v3"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// algoNames lists the algorithms as a policies file spells them.
var algoNames = func() string {
	var names []string
	for _, a := range check.Algos {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}()

// shaping reads the fields of the two algorithms that take more than a
// limit and a scale: slices (algo slices: how many slices the window is
// cut into) and queue and wait (algo leaky: how many requests may wait
// their turn, and whether /auth holds the answer until then). Each is
// refused with another algorithm, where it would do nothing.
func (p *parser) shaping(fs map[string]*yaml.Node, in string, pol *Policy) error {
	var err error
	if sn := fs["slices"]; sn != nil {
		if pol.Algo != rl.Slices {
			return p.errf(sn, "%s: slices is for algo: slices", in)
		}
		if pol.Slices, err = p.integer(sn, in+": slices", check.MinSlices, check.MaxSlices); err != nil {
			return err
		}
	}
	if qn := fs["queue"]; qn != nil {
		if pol.Algo != rl.Leaky {
			return p.errf(qn, "%s: queue is for algo: leaky", in)
		}
		if pol.Queue, err = p.integer(qn, in+": queue", 0, check.MaxQueue); err != nil {
			return err
		}
		// The queue must drain within ten years at every limit the policy
		// gives, the plans' too (check.Validate).
		limits := []int64{pol.Limit}
		for _, l := range pol.Plans {
			limits = append(limits, l)
		}
		for _, l := range limits {
			r := rl.Request{ID: "x", Scale: millis.Duration(pol.Scale), Limit: l, Algo: rl.Leaky, Queue: pol.Queue}
			if err := check.ValidateWire(r, 0); err != nil {
				var fe *rl.FieldError
				if errors.As(err, &fe) && fe.Field == "queue" {
					return p.errf(qn, "%s: queue %d with limit %d: %s", in, pol.Queue, l, fe.Rule)
				}
			}
		}
	}
	if wn := fs["wait"]; wn != nil {
		if wn.Kind != yaml.ScalarNode || wn.Tag != "!!bool" {
			return p.errf(wn, "%s: wait must be true or false", in)
		}
		pol.Wait = wn.Value == "true" || wn.Value == "True" || wn.Value == "TRUE"
		if pol.Wait && pol.Algo != rl.Leaky {
			return p.errf(wn, "%s: wait is for algo: leaky (no other algorithm delays a request)", in)
		}
	}
	return nil
}
