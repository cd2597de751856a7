// Package cli is what the project's commands share about flags: parsing
// with the environment as a second source, the usage error a bad flag
// gives, and the exit status every outcome maps to.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// UsageError is a bad flag or argument: the command exits 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg + " (see -h)" }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, a ...any) error { return &UsageError{fmt.Sprintf(format, a...)} }

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
		return nil, &UsageError{err.Error()}
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

// ExitCode reports err on stderr as command's and returns the exit status:
// 0 for nil and for flag.ErrHelp (the usage was asked for), 2 for a
// UsageError, 1 for anything else.
func ExitCode(command string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", command, err)
	var ue *UsageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}
