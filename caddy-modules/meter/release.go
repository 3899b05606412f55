package meter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

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

// release starts the held job or retry of account that token names,
// trying again as above; it reports whether the cell confirmed it within
// the call.
func (m *Meter) release(ctx context.Context, account, job, token string) bool {
	for _, d := range releaseBackoff {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return false
		}
		err := m.releaseOnce(ctx, account, job, token, false)
		if err == nil {
			return true
		}
		m.rt.Logger().Warn("meter: release of a charged job failed; trying again", "job", job, "err", err)
	}
	go func() {
		deadline := time.Now().Add(releaseFor)
		t := time.NewTicker(releaseEvery)
		defer t.Stop()
		for time.Now().Before(deadline) {
			select {
			case <-m.ctx.Done():
				return
			case <-t.C:
			}
			if err := m.releaseOnce(m.ctx, account, job, token, false); err == nil {
				m.rt.Logger().Info("meter: released a charged job late", "job", job)
				return
			}
		}
		m.rt.Logger().Error("meter: a charged job was never released; its hold expired", "job", job, "account", account)
	}()
	return false
}

// drop tells the cell a hold will not be released (its charge was
// refused), so a retry of it need not wait for the hold to expire. Once:
// the expiry covers a drop that does not arrive.
func (m *Meter) drop(ctx context.Context, account, job, token string) {
	if err := m.releaseOnce(ctx, account, job, token, true); err != nil {
		m.rt.Logger().Warn("meter: a refused hold was not dropped; it expires", "job", job, "err", err)
	}
}

// errNoCell is a release whose cell is not in the region right now.
var errNoCell = errors.New("the job's cell is not reachable")

// releaseOnce sends POST /scrape/jobs/{job}/release (?drop=1 with drop)
// to the job's cell, signed as every request to a cell, and checks the
// cell's signed answer.
func (m *Meter) releaseOnce(ctx context.Context, account, job, token string, drop bool) error {
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
		return errNoCell
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
	keys := m.rt.RegionKeys()
	nonce := keys.Sign(req, regionauth.Claims{Account: account, Private: m.rt.AllowPrivateNetworks()}, m.rt.Now())
	resp, err := m.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if !keys.VerifyAnswer(nonce, resp.StatusCode, resp.Header.Get(metering.Header), resp.Header.Get(regionauth.HeaderUsageSig)) {
		return fmt.Errorf("release: the answer of %s is not signed with the region's key", addr)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("release: %d %s", resp.StatusCode, body)
	}
	return nil
}
