package monitor

import "time"

// Lag is how far the most overdue running monitor is past its due time
// now (0 when none is overdue): the scheduler's check lag
// (docs/operations.md, "Metrics").
func (s *Service) Lag() (time.Duration, error) {
	all, err := s.records()
	if err != nil {
		return 0, err
	}
	now := s.cfg.Now()
	var lag time.Duration
	for _, m := range all {
		if m.Paused || m.NextAt.IsZero() {
			continue
		}
		if l := now.Sub(m.NextAt); l > lag {
			lag = l
		}
	}
	return lag, nil
}

// WebhookFailures are the webhook attempts that failed and the deliveries
// given up since the cell started.
func (s *Service) WebhookFailures() (attempts, gaveUp int64) { return s.hooks.Failures() }
