package redisbackend_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
)

// TestMain starts the private redis-server the examples use (redisURL):
// an example cannot start one itself, nor skip. The tests start their own.
// Without redis-server the examples are left out, as the tests skip,
// unless RATERLIMITER_REQUIRE_REDIS=1 makes that a failure.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runWithRedis(m))
}

func runWithRedis(m *testing.M) int {
	dir, err := os.MkdirTemp("", "redisbackend-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := redistest.StartMain(dir)
	if err != nil {
		if os.Getenv(redistest.RequireEnv) == "1" {
			fmt.Fprintf(os.Stderr, "%v (%s=1)\n", err, redistest.RequireEnv)
			return 1
		}
		fmt.Fprintf(os.Stderr, "redisbackend: examples not run: %v\n", err)
		skip := "^Example"
		if f := flag.Lookup("test.skip"); f != nil && f.Value.String() != "" {
			skip = f.Value.String() + "|" + skip
		}
		if err := flag.Set("test.skip", skip); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}
	defer srv.Kill()
	redisURL = srv.URL()
	return m.Run()
}
