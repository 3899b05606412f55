package members

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// logWriter turns memberlist's std log lines, "[LEVEL] memberlist: text",
// into slog records at that level, so its debug chatter stays at debug.
type logWriter struct{ log *slog.Logger }

var logLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERR]", slog.LevelError},
	{"[ERROR]", slog.LevelError},
}

func (w logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for _, l := range logLevels {
		if rest, ok := bytes.CutPrefix(line, []byte(l.prefix)); ok {
			level, line = l.level, bytes.TrimSpace(rest)
			break
		}
	}
	ctx := context.Background()
	if w.log.Enabled(ctx, level) {
		line = bytes.TrimPrefix(line, []byte("memberlist: "))
		w.log.Log(ctx, level, string(line))
	}
	return len(p), nil
}

// newStdLogger routes memberlist's std log lines to l at their own level.
func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(logWriter{l}, "", 0)
}
