package api

// SampleDashboard records the dashboard's counters now, as its once-a-second
// sampler does.
func SampleDashboard(s *Server) { s.sampleDashboard() }

// DashboardSamples is how many rate samples the dashboard holds.
func DashboardSamples(s *Server) int {
	s.dash.mu.Lock()
	defer s.dash.mu.Unlock()
	return len(s.dash.samples)
}
