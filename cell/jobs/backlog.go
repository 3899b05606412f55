package jobs

import "time"

// Backlog is the work the cell's jobs have left (docs/operations.md,
// "Metrics"): the released jobs with URLs still to fetch, those URLs, and
// the creation time of the oldest such job (zero when there is none). A
// held job (not yet released by the gate) is not counted.
func (m *Manager) Backlog() (jobs, urls int, oldest time.Time) {
	m.mu.Lock()
	all := make([]*job, 0, len(m.jobs))
	for _, j := range m.jobs {
		all = append(all, j)
	}
	m.mu.Unlock()
	for _, j := range all {
		j.mu.Lock()
		if !j.gone && j.pending > 0 && j.meta.Hold == "" {
			jobs++
			urls += j.pending
			if oldest.IsZero() || j.meta.CreatedAt.Before(oldest) {
				oldest = j.meta.CreatedAt
			}
		}
		j.mu.Unlock()
	}
	return jobs, urls, oldest
}
