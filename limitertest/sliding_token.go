package limitertest

// slidingCases are the sliding window's cases.
func slidingCases() []Case { return nil }

// tokenCases are GCRA's cases.
func tokenCases() []Case { return nil }
