package raftpebble

import (
	"context"
	"fmt"
	"log/slog"
)

// pebbleLogger routes Pebble's messages to slog. Pebble's default logger
// writes to the standard log package, which would put lines such as
// "Found 1 WALs" and WAL replay summaries on stderr at every Open.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.log(slog.LevelDebug, format, args)
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.log(slog.LevelError, format, args)
}

// Fatalf is called by Pebble for states it cannot continue from (such as
// detected corruption); it must not return, so after logging it panics
// instead of exiting the whole process as Pebble's default logger does.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	panic("raftpebble: pebble fatal: " + msg)
}

func (p pebbleLogger) log(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if !p.l.Enabled(ctx, level) {
		return
	}
	p.l.Log(ctx, level, fmt.Sprintf(format, args...), "component", "pebble")
}
