// Package readfile reads the files a process is configured with as input
// it does not trust: a regular file only (never a FIFO, a device, a socket
// or a directory, even through a symbolic link), opened so that nothing
// blocks in open, and at most a given size, counted while reading rather
// than taken from a size Stat reports.
package readfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular matches the error about a path that names something other
// than a regular file.
var ErrNotRegular = errors.New("readfile: not a regular file")

// ErrTooLarge matches the error about a file larger than the bound.
var ErrTooLarge = errors.New("readfile: file too large")

// Error is a file that cannot be read, or is refused.
type Error struct {
	// Path is the file.
	Path string
	// Msg says why, for a person: "is a FIFO, not a regular file".
	Msg string
	// Err is the cause: ErrNotRegular, ErrTooLarge or the system's error.
	Err error
}

// Error returns "readfile: PATH MSG".
func (e *Error) Error() string { return "readfile: " + e.Path + " " + e.Msg }

// Reason is what err says about its file, for a message that names the
// file itself: an *Error's Msg ("is a FIFO, not a regular file"), or err's
// own message.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Open opens the regular file at path for reading; the caller closes it.
// Anything else is refused before it is opened (a FIFO would block open
// until a writer came; a device can have effects on open) and again after
// (a rename over path in between), with an error matching ErrNotRegular.
func Open(path string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, &Error{Path: path, Msg: "cannot be read: " + Cause(err).Error(), Err: err}
	}
	if err := regular(path, fi); err != nil {
		return nil, nil, err
	}
	// O_NONBLOCK: a FIFO renamed over path since the Stat does not block
	// the open; it is refused below. A regular file ignores the flag.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, &Error{Path: path, Msg: "cannot be read: " + Cause(err).Error(), Err: err}
	}
	if fi, err = f.Stat(); err == nil {
		err = regular(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Read returns the contents of the regular file at path (as Open opens
// it), refusing a file of more than max bytes with an error matching
// ErrTooLarge: it reads at most max+1 bytes, whatever size the file
// claims or grows to.
func Read(path string, max int64) ([]byte, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("is %d bytes; at most %d are read", fi.Size(), max), Err: ErrTooLarge}
	}
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, &Error{Path: path, Msg: "cannot be read: " + Cause(err).Error(), Err: err}
	}
	if int64(buf.Len()) > max {
		return nil, &Error{Path: path, Msg: fmt.Sprintf("is more than %d bytes (it grew while read); at most %d are read", max, max), Err: ErrTooLarge}
	}
	return buf.Bytes(), nil
}

// regular refuses what fi describes unless it is a regular file.
func regular(path string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	what := "a special file"
	switch t := fi.Mode().Type(); {
	case t&fs.ModeDir != 0:
		what = "a directory"
	case t&fs.ModeNamedPipe != 0:
		what = "a FIFO"
	case t&fs.ModeSocket != 0:
		what = "a socket"
	case t&fs.ModeCharDevice != 0:
		what = "a character device"
	case t&fs.ModeDevice != 0:
		what = "a block device"
	}
	return &Error{Path: path, Msg: "is " + what + ", not a regular file", Err: ErrNotRegular}
}

// Cause is err without the path a *fs.PathError adds to it: for a message
// that names the path itself.
func Cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
