package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"google.golang.org/grpc/grpclog"
)

// newLogger is the sidecar's logger on w, in format ("json" or anything
// else for text).
func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// installGlobalLogger sends what the libraries log on their own through l:
// the standard library's log package (slog.SetDefault redirects it) and
// gRPC's logger, so that with -log-format json every line the process
// writes is JSON. Only main calls it: both are process-wide.
func installGlobalLogger(l *slog.Logger) {
	slog.SetDefault(l)
	grpclog.SetLoggerV2(grpcLogger{l})
}

// grpcLogger is gRPC's logger on slog. gRPC's own default writes its
// errors only; its info and warnings (a client's broken connection, for
// one) go to debug here, so a hostile client cannot flood the log.
type grpcLogger struct{ l *slog.Logger }

func (g grpcLogger) Info(args ...any)                    { g.debug(fmt.Sprint(args...)) }
func (g grpcLogger) Infoln(args ...any)                  { g.debug(fmt.Sprint(args...)) }
func (g grpcLogger) Infof(format string, args ...any)    { g.debug(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Warning(args ...any)                 { g.debug(fmt.Sprint(args...)) }
func (g grpcLogger) Warningln(args ...any)               { g.debug(fmt.Sprint(args...)) }
func (g grpcLogger) Warningf(format string, args ...any) { g.debug(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Error(args ...any)                   { g.error(fmt.Sprint(args...)) }
func (g grpcLogger) Errorln(args ...any)                 { g.error(fmt.Sprint(args...)) }
func (g grpcLogger) Errorf(format string, args ...any)   { g.error(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Fatal(args ...any)                   { g.fatal(fmt.Sprint(args...)) }
func (g grpcLogger) Fatalln(args ...any)                 { g.fatal(fmt.Sprint(args...)) }
func (g grpcLogger) Fatalf(format string, args ...any)   { g.fatal(fmt.Sprintf(format, args...)) }
func (g grpcLogger) V(l int) bool                        { return l <= 0 }

func (g grpcLogger) debug(msg string) { g.l.Debug("grpc: " + msg) }
func (g grpcLogger) error(msg string) { g.l.Error("grpc: " + msg) }

func (g grpcLogger) fatal(msg string) {
	g.error(msg)
	os.Exit(1)
}

var _ grpclog.LoggerV2 = grpcLogger{}
