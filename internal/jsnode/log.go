package jsnode

import (
	"context"
	"fmt"
	"log/slog"
)

// logger adapts the server's logger to slog. Notices (every route
// connect, every stream created) go to debug; warnings and errors to
// their levels. Fatal is an error here: the server's own logger exits the
// process, which an embedded server must never do.
type logger struct{ l *slog.Logger }

func (g *logger) Noticef(format string, v ...any) {
	if g.l.Enabled(context.Background(), slog.LevelDebug) {
		g.l.Debug(fmt.Sprintf(format, v...))
	}
}
func (g *logger) Warnf(format string, v ...any)  { g.l.Warn(fmt.Sprintf(format, v...)) }
func (g *logger) Errorf(format string, v ...any) { g.l.Error(fmt.Sprintf(format, v...)) }
func (g *logger) Fatalf(format string, v ...any) { g.l.Error(fmt.Sprintf(format, v...), "fatal", true) }
func (g *logger) Debugf(format string, v ...any) {}
func (g *logger) Tracef(format string, v ...any) {}
