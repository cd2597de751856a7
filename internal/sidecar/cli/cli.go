// Package cli is what the project's commands share about flags: parsing,
// the usage error a bad flag gives, and the exit status every outcome maps
// to.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
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

// Parse parses args with fs, whose error handling must be
// flag.ContinueOnError. A positional argument and a flag fs refuses are
// UsageErrors; -h gives flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return Usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// ExitCode reports err on stderr as command's, unless it is nil, the
// usage asked for (flag.ErrHelp) or Logged, and returns its Status.
func ExitCode(command string, err error, stderr io.Writer) int {
	status := Status(err)
	var le *loggedError
	if status != 0 && !errors.As(err, &le) {
		fmt.Fprintf(stderr, "%s: %v\n", command, err)
	}
	return status
}

// Status is the exit status of err: 0 for nil and flag.ErrHelp (the usage
// was asked for), 2 for a UsageError, 1 otherwise.
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
