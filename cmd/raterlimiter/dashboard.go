package main

import (
	"flag"

	"github.com/raterlimiter/raterlimiter/api"
)

// dashboardFlags are the flags of GET /dashboard.
type dashboardFlags struct {
	off     bool
	hashIDs bool
}

// dashboardFlagNames lists them in the order -h shows them.
func dashboardFlagNames() []string { return []string{"dashboard-off", "dashboard-hash-ids"} }

func (f *dashboardFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.off, "dashboard-off", false, "turn off GET /dashboard and its top-k feed")
	fs.BoolVar(&f.hashIDs, "dashboard-hash-ids", false, "show ids on /dashboard as a keyed hash (12 hex digits, key drawn at start), for deployments where ids are secrets")
}

// config is the api.DashboardConfig of the flags, for backend name.
func (f *dashboardFlags) config(backend string, state func() api.BackendState) api.DashboardConfig {
	return api.DashboardConfig{Off: f.off, HashIDs: f.hashIDs, Backend: backend, State: state}
}
