// Package clienttune sets what package client keeps off its Config: the
// connections to the sidecar and the batches on their way at once, which
// the load tool (cmd/rlload) turns to measure them. Every other program
// takes the client's defaults.
//
// Package client registers its implementation when it is linked in; a
// program that imports clienttune imports client too.
package clienttune

// Tuning is what New sets beyond a client.Config. The zero Tuning is
// client.New's.
type Tuning struct {
	// MaxConns caps the connections to the sidecar, all of which are kept
	// alive when idle; a call that finds them all busy waits for one until
	// its deadline. Default 256
	// (internal/defaults.ClientMaxConnsPerHost).
	MaxConns int
	// BatchInFlight is how many batches may be on their way at once, with
	// batching on. Default 1 (internal/defaults.BatchInFlight): the
	// checks that arrive while a batch travels make the next one.
	BatchInFlight int
}

var newTuned func(cfg any, t Tuning) (any, error)

// Register is called by package client when it is initialized: tuned
// makes a client of a client.Config with a Tuning.
func Register(tuned func(cfg any, t Tuning) (any, error)) { newTuned = tuned }

// New makes a client as client.New(cfg) does, with t's tuning:
// clienttune.New[*client.Client](cfg, t). It panics when cfg is not a
// client.Config or L not a *client.Client.
func New[L, C any](cfg C, t Tuning) (L, error) {
	if newTuned == nil {
		panic("clienttune: package client is not linked in")
	}
	c, err := newTuned(cfg, t)
	return c.(L), err
}
