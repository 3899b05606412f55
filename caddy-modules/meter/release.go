package meter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/regionauth"
)

// Release of held jobs and retries (metering.Usage.Hold). The cell records
// a job submission or a retry held and reports its usage; the meter
// charges it and only then releases it, so a call whose charge is refused
// never runs. A release that fails is tried again: releaseTries at once
// (inside the call), then every releaseEvery in the background for as long
// as the cell keeps the hold (jobs.DefaultHoldTTL).
const (
	releaseTimeout = 5 * time.Second
	releaseEvery   = 5 * time.Second
	releaseFor     = 10 * time.Minute
)

var releaseBackoff = []time.Duration{0, 200 * time.Millisecond, time.Second}

// owe records a charged hold's release before it is tried, so a gate that
// stops before the cell confirms it still makes it when it starts again
// (resume).
func (m *Meter) owe(account, job, token, credits string) {
	p := gate.PendingRelease{Account: account, Job: job, Token: token, At: m.rt.Now(), Credits: credits}
	if err := m.rt.OweRelease(p); err != nil {
		m.rt.Logger().Error("meter: could not record a release owed; a crash before it is made would leave a charged job unstarted", "job", job, "err", err)
	}
}

// released forgets an owed release.
func (m *Meter) released(job, token string) {
	if err := m.rt.Released(job, token); err != nil {
		m.rt.Logger().Warn("meter: forget a release made", "job", job, "err", err)
	}
}

// resume makes the releases a previous run of the gate owed (charged,
// not confirmed by the cell), in the background, each until the cell's
// hold would have expired.
func (m *Meter) resume() {
	owed, err := m.rt.PendingReleases()
	if err != nil {
		m.rt.Logger().Error("meter: read the releases owed", "err", err)
		return
	}
	for _, p := range owed {
		left := releaseFor - m.rt.Now().Sub(p.At)
		if left <= 0 {
			m.rt.Logger().Error("meter: a charged job was never released; its hold expired", "job", p.Job, "account", p.Account)
			m.released(p.Job, p.Token)
			continue
		}
		m.rt.Logger().Info("meter: resuming a release owed since before the gate started", "job", p.Job)
		go m.retryRelease(p.Account, p.Job, p.Token, p.Credits, left)
	}
}

// release starts the held job or retry of account that token names, which
// was charged credits, trying again as above; it reports whether the cell
// confirmed it within the call. The release is owed (recorded) until the
// cell confirms it.
func (m *Meter) release(ctx context.Context, account, job, token, credits string) bool {
	m.owe(account, job, token, credits)
	for _, d := range releaseBackoff {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return false
		}
		err := m.releaseOnce(ctx, account, job, token, credits, false)
		if err == nil {
			m.released(job, token)
			return true
		}
		m.rt.Logger().Warn("meter: release of a charged job failed; trying again", "job", job, "err", err)
	}
	go m.retryRelease(account, job, token, credits, releaseFor)
	return false
}

// retryRelease tries a release every releaseEvery for up to d. When the
// module stops first (a reload, a shutdown) the release stays owed and the
// next start resumes it.
func (m *Meter) retryRelease(account, job, token, credits string, d time.Duration) {
	deadline := time.Now().Add(d)
	t := time.NewTicker(releaseEvery)
	defer t.Stop()
	for time.Now().Before(deadline) {
		if err := m.releaseOnce(m.ctx, account, job, token, credits, false); err == nil {
			m.rt.Logger().Info("meter: released a charged job late", "job", job)
			m.released(job, token)
			return
		}
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
	}
	m.rt.Logger().Error("meter: a charged job was never released; its hold expired", "job", job, "account", account)
	m.released(job, token)
}

// drop tells the cell a hold will not be released (its charge was
// refused), so a retry of it need not wait for the hold to expire. Once:
// the expiry covers a drop that does not arrive.
func (m *Meter) drop(ctx context.Context, account, job, token string) {
	if err := m.releaseOnce(ctx, account, job, token, "", true); err != nil {
		m.rt.Logger().Warn("meter: a refused hold was not dropped; it expires", "job", job, "err", err)
	}
}

// errNoCell is a release whose cell is not in the region right now.
var errNoCell = errors.New("the job's cell is not reachable")

// releaseOnce sends POST /scrape/jobs/{job}/release (?drop=1 with drop)
// to the job's cell, signed as every request to a cell, with the credits
// the hold was charged, and checks the cell's signed answer.
func (m *Meter) releaseOnce(ctx context.Context, account, job, token, credits string, drop bool) error {
	_, cell, ok := jobid.Parse(job)
	if !ok {
		return fmt.Errorf("release: bad job id %q", job)
	}
	addr := ""
	for _, c := range m.rt.Cells() {
		if c.Name == cell {
			addr = c.API
		}
	}
	if addr == "" {
		// The owner is down: in a clustered region another cell takes
		// the release through the job log (cell/jobs/logread.go), so a
		// charged job starts without waiting for it.
		c, ok := m.rt.StandIn(cell, job)
		if !ok {
			return errNoCell
		}
		addr = c.API
	}
	ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	u := "http://" + addr + "/scrape/jobs/" + job + metering.ReleasePath
	if drop {
		u += "?drop=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set(metering.HoldHeader, token)
	if credits != "" {
		req.Header.Set(metering.ChargedHeader, credits)
	}
	a, err := m.rt.RegionKeys().Do(m.client, req, regionauth.Claims{Account: account, Private: m.rt.AllowPrivateNetworks()}, m.rt.Now(), 4096)
	if err == nil {
		err = a.OK()
	}
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}
