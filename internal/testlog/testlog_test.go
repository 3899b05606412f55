package testlog

import (
	"log/slog"
	"testing"
)

func TestNoLogAfterTheTest(t *testing.T) {
	var log *slog.Logger
	t.Run("inner", func(t *testing.T) {
		log = New(t, slog.LevelInfo)
		log.Info("during the test")
	})
	// After the subtest ended its writer is stopped: this must not panic.
	log.Info("after the test")
}
