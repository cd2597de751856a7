package api

// SampleDashboard records the dashboard's counters now, as its once-a-second
// sampler does.
func SampleDashboard(s *Server) { s.sampleDashboard() }

// NoDashboardSampler keeps the background sampler from starting, so a test
// decides when samples are taken.
func NoDashboardSampler(s *Server) { s.dash.once.Do(func() {}) }
