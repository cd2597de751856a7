// Package term answers the one question the lab's commands ask of their
// output.
package term

import (
	"io"
	"os"
)

// IsTerminal reports whether w is a character device, as a terminal is.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
