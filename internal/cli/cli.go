// Package cli is what the project's commands share about flags: parsing
// with the environment as a second source, the usage error a bad flag
// gives, and the exit status every outcome maps to.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// UsageError is a bad flag or argument, or a file a flag names that does
// not load: the command exits 2.
type UsageError struct {
	Msg string
	// File marks a file that does not load (a policies file, a token
	// file): the message says what is wrong with it, and -h would not
	// help, so Error does not point there.
	File bool
}

func (e *UsageError) Error() string {
	if e.File {
		return e.Msg
	}
	return e.Msg + " (see -h)"
}

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, a ...any) error { return &UsageError{Msg: fmt.Sprintf(format, a...)} }

// Filef returns a UsageError about a file a flag names, with a formatted
// message that names the file.
func Filef(format string, a ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, a...), File: true}
}

// Env is the environment as a second source of flags.
type Env struct {
	// Prefix starts every variable's name: flag -max-id-bytes is
	// Prefix+"MAX_ID_BYTES".
	Prefix string
	// Lookup reads a variable (os.LookupEnv).
	Lookup func(string) (string, bool)
	// CommandLineOnly are flags the environment may not set: those that make
	// the command do something else than its work (-version), which a stray
	// variable in a deployment would otherwise turn on.
	CommandLineOnly map[string]bool
	// NotFlags start the names of variables with Prefix that set no flag
	// and are read elsewhere on purpose (by the test suite): Unknown does
	// not report them.
	NotFlags []string
}

// Name is the variable that sets flag name, or "" for a flag only the
// command line sets.
func (e Env) Name(name string) string {
	if e.CommandLineOnly[name] {
		return ""
	}
	return e.Prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse parses args with fs, whose error handling must be
// flag.ContinueOnError, then, when env is not nil, sets from the
// environment every flag the command line left unset. It returns the flags
// set either way. A positional argument, a flag fs refuses and a variable
// whose value the flag refuses are UsageErrors; -h gives flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string, env *Env) (set map[string]bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, &UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, Usagef("unexpected argument %q", fs.Arg(0))
	}
	set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if env == nil {
		return set, nil
	}
	fs.VisitAll(func(f *flag.Flag) {
		name := env.Name(f.Name)
		if set[f.Name] || err != nil || name == "" {
			return
		}
		if v, ok := env.Lookup(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = Usagef("invalid value %q for %s: %v", v, name, e)
			}
			set[f.Name] = true
		}
	})
	return set, err
}

// Unknown returns a warning for every variable of environ ("NAME=value"
// pairs, as os.Environ gives them) that has the prefix but sets no flag of
// fs: a typo (RATERLIMITER_POLICY) or a flag only the command line sets
// would otherwise be ignored without a word. Each warning names the
// variable and, when one is close, the variable it may have meant. Only
// variables Lookup also sees are reported.
func (e *Env) Unknown(fs *flag.FlagSet, environ []string) []string {
	known := map[string]string{} // variable -> flag
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if n := e.Name(f.Name); n != "" {
			known[n] = f.Name
			names = append(names, n)
		}
	})
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, e.Prefix) || known[name] != "" || slices.ContainsFunc(e.NotFlags, func(p string) bool {
			return strings.HasPrefix(name, p)
		}) {
			continue
		}
		if _, ok := e.Lookup(name); !ok {
			continue
		}
		flagName := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, e.Prefix), "_", "-"))
		switch {
		case e.CommandLineOnly[flagName] && fs.Lookup(flagName) != nil:
			out = append(out, name+" is ignored: -"+flagName+" is set on the command line only")
		case closest(name, names) != "":
			out = append(out, name+" is ignored: no flag reads it (did you mean "+closest(name, names)+"?)")
		default:
			out = append(out, name+" is ignored: no flag reads it")
		}
	}
	slices.Sort(out)
	return out
}

// closest returns the name of names nearest to s by edit distance, if it
// is at most 3 edits away.
func closest(s string, names []string) string {
	best, bestD := "", 4
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ExitCode reports err on stderr as command's and returns the exit status:
// 0 for nil and for flag.ErrHelp (the usage was asked for), 2 for a
// UsageError, 1 for anything else.
func ExitCode(command string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var le *loggedError
	if !errors.As(err, &le) {
		fmt.Fprintf(stderr, "%s: %v\n", command, err)
	}
	return Status(err)
}

// Status is the exit status ExitCode returns for err, without reporting
// it: 0 for nil and flag.ErrHelp, 2 for a UsageError, 1 otherwise.
func Status(err error) int {
	var ue *UsageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// Logged marks err as already reported by the command's own log (in its
// log format): ExitCode then writes nothing and only maps it to its exit
// status, which Logged keeps.
func Logged(err error) error { return &loggedError{err} }

type loggedError struct{ err error }

func (e *loggedError) Error() string { return e.err.Error() }
func (e *loggedError) Unwrap() error { return e.err }
