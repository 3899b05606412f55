package gate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/usage"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/store"
)

// Monitor charges (docs/api.md, "Monitors: billing"). A monitor's checks
// and confirmed changes happen in the background, with no request whose
// answer could carry a usage header. Each cell keeps them in an outbox;
// the gate collects them from every live cell of its region (GET
// /monitor-charges, signed as every gate→cell request, without an
// account), prices each with the price table, charges the account's hold
// under a receipt derived from the charge's id, records the usage line,
// and acknowledges (POST /monitor-charges/ack). The charge's id is marked
// in the gate's store before the hold is charged, so a charge collected
// twice (an ack lost, a gate restarted) is charged once; a gate that dies
// between the mark and the charge loses that charge rather than doubling
// it.

// monitorChargeEvery is how often the gate collects monitor charges.
const monitorChargeEvery = 5 * time.Second

type monitorCharge struct {
	ID      string         `json:"id"`
	Account string         `json:"account"`
	Monitor string         `json:"monitor"`
	URL     string         `json:"url"`
	At      time.Time      `json:"at"`
	Usage   metering.Usage `json:"usage"`
}

func (rt *Runtime) collectMonitorCharges(ctx context.Context) {
	t := time.NewTicker(monitorChargeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := rt.CollectMonitorCharges(ctx); err != nil && ctx.Err() == nil {
			rt.cfg.Logger.Warn("monitor charges: collect", "err", err)
		}
	}
}

// CollectMonitorCharges collects, charges and acknowledges the monitor
// charges waiting at the region's live cells; it returns how many it
// charged. Tests call it instead of waiting for the ticker.
func (rt *Runtime) CollectMonitorCharges(ctx context.Context) (int, error) {
	var errs []error
	n, err := rt.collectStored(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("monitor store: %w", err))
	}
	for _, c := range rt.Cells() {
		k, err := rt.collectFrom(ctx, c.API)
		n += k
		if err != nil {
			errs = append(errs, fmt.Errorf("cell %s: %w", c.Name, err))
		}
	}
	return n, errors.Join(errs...)
}

func (rt *Runtime) collectFrom(ctx context.Context, addr string) (int, error) {
	var list struct {
		Charges []monitorCharge `json:"charges"`
	}
	if err := rt.cellCall(ctx, http.MethodGet, "http://"+addr+"/monitor-charges", nil, &list); err != nil {
		return 0, err
	}
	if len(list.Charges) == 0 {
		return 0, nil
	}
	var done []string
	n := 0
	for _, c := range list.Charges {
		charged, err := rt.chargeMonitor(ctx, &c)
		if err != nil {
			// No credit, or a charge the price table cannot price: not
			// charged, logged, acknowledged (docs/api.md).
			rt.cfg.Logger.Warn("monitor charges: not charged", "charge", c.ID, "account", c.Account, "err", err)
		}
		if charged {
			n++
		}
		done = append(done, c.ID)
	}
	body, _ := json.Marshal(map[string][]string{"ids": done})
	return n, rt.cellCall(ctx, http.MethodPost, "http://"+addr+"/monitor-charges/ack", body, nil)
}

// collectStored charges the charges in the region's monitor store (where
// the cells write them) and removes them.
func (rt *Runtime) collectStored(ctx context.Context) (int, error) {
	var list []monitorCharge
	var keys [][]byte
	err := rt.st.Scan([]byte(monstore.ChargePrefix), nil, func(k, v []byte) (bool, error) {
		var c monitorCharge
		if err := json.Unmarshal(v, &c); err != nil {
			return false, err
		}
		list, keys = append(list, c), append(keys, append([]byte{}, k...))
		return len(list) < 500, nil
	})
	if err != nil || len(list) == 0 {
		return 0, err
	}
	n := 0
	b := &monstore.Batch{Sync: true}
	for i := range list {
		charged, err := rt.chargeMonitor(ctx, &list[i])
		if err != nil {
			rt.cfg.Logger.Warn("monitor charges: not charged", "charge", list[i].ID, "account", list[i].Account, "err", err)
		}
		if charged {
			n++
		}
		b.Delete(keys[i])
	}
	return n, rt.monitors.local.Apply(ctx, b)
}

func monitorChargeKey(id string) []byte { return []byte(store.PrefixMonitorCharges + id) }

// chargeMonitor charges one monitor charge once.
func (rt *Runtime) chargeMonitor(ctx context.Context, c *monitorCharge) (bool, error) {
	if _, err := rt.st.Get(monitorChargeKey(c.ID)); err == nil {
		return false, nil // charged before; its ack was lost
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if err := rt.st.Set(monitorChargeKey(c.ID), []byte(rt.cfg.Now().UTC().Format(time.RFC3339)), store.Sync); err != nil {
		return false, err
	}
	u := c.Usage
	count := 1
	if u.Count != nil {
		count = *u.Count
	}
	level := u.EffectiveLevel()
	price, err := rt.Prices().Quote(billing.Usage{Kind: u.Kind, Level: level, Cache: u.Cache, Count: count})
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256([]byte(c.ID))
	receipt := "r_" + rt.cfg.Region + "_" + hex.EncodeToString(sum[:12])
	if price > 0 {
		if err := rt.Holds().Charge(ctx, c.Account, receipt, price); err != nil {
			return false, err
		}
	}
	boxes := u.Boxes
	if boxes == nil && u.Engine != "" {
		boxes = []string{u.Engine}
	}
	line := &usage.Line{Receipt: receipt, At: rt.cfg.Now().UTC(), Region: rt.cfg.Region, Account: c.Account,
		Call: u.Kind, URL: c.URL, Engine: u.Engine, Level: level, Cache: u.Cache, Count: count,
		Status: http.StatusOK, Boxes: boxes, Units: billing.Amount(price)}
	if err := rt.usage.Record(line); err != nil {
		rt.cfg.Logger.Warn("monitor charges: usage line not recorded", "receipt", receipt, "err", err)
	}
	return true, nil
}

// cellCall makes one signed gate→cell call without an account and checks
// the cell's signed answer.
func (rt *Runtime) cellCall(ctx context.Context, method, url string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	a, err := rt.cfg.RegionKeys.Do(http.DefaultClient, req, regionauth.Claims{Private: rt.cfg.AllowPrivateNetworks}, rt.cfg.Now(), 64<<20)
	if err == nil {
		err = a.OK()
	}
	if err != nil {
		return fmt.Errorf("the cell: %w", err)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(a.Body, out)
}
