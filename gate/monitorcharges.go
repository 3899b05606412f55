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
	"strings"
	"sync"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/usage"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/ledger"
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
	ack := chargeAck{IDs: []string{}, Credits: map[string]string{}}
	n := 0
	for i, res := range rt.chargeAll(ctx, list.Charges) {
		c, price, charged, err := list.Charges[i], res.price, res.charged, res.err
		if err != nil {
			// No credit, or a charge the price table cannot price: not
			// charged, logged, acknowledged (docs/api.md); a crawl whose
			// page found no credit is stopped by its cell.
			rt.cfg.Logger.Warn("monitor charges: not charged", "charge", c.ID, "account", c.Account, "err", err)
			if errors.Is(err, ledger.ErrNoCredit) || errors.Is(err, ledger.ErrSpendCap) {
				ack.Refused = append(ack.Refused, c.ID)
			}
		} else {
			ack.Credits[c.ID] = price.String()
		}
		if charged {
			n++
		}
		ack.IDs = append(ack.IDs, c.ID)
	}
	body, _ := json.Marshal(ack)
	return n, rt.cellCall(ctx, http.MethodPost, "http://"+addr+"/monitor-charges/ack", body, nil)
}

// chargeAck is the body of POST /monitor-charges/ack: the ids the gate
// collected, what it charged for each (a charge collected twice shows its
// first price), and those it refused for want of credit.
type chargeAck struct {
	IDs     []string          `json:"ids"`
	Credits map[string]string `json:"credits"`
	Refused []string          `json:"refused,omitempty"`
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
	for i, res := range rt.chargeAll(ctx, list) {
		if res.err != nil {
			rt.cfg.Logger.Warn("monitor charges: not charged", "charge", list[i].ID, "account", list[i].Account, "err", res.err)
		}
		if res.charged {
			n++
		}
		b.Delete(keys[i])
	}
	return n, rt.monitors.local.Apply(ctx, b)
}

func monitorChargeKey(id string) []byte { return []byte(store.PrefixMonitorCharges + id) }

// chargeResult is what chargeAll did with one charge: its price, whether
// this collection charged it (false for one charged before), or why not.
type chargeResult struct {
	price   ledger.MC
	charged bool
	err     error
}

// chargeAll charges each of cs once and returns what it did with each.
// Each charge's mark keeps the time and the price, so a charge collected
// again (its ack was lost) says what it was charged. The marks of a
// collection are written in one synced write before any is charged (a
// crawl's thousand pages cost one sync, not a thousand).
func (rt *Runtime) chargeAll(ctx context.Context, cs []monitorCharge) []chargeResult {
	out := make([]chargeResult, len(cs))
	prices := make([]ledger.MC, len(cs))
	fresh := make([]bool, len(cs))
	b := rt.st.NewBatch()
	now := rt.cfg.Now().UTC()
	for i := range cs {
		c := &cs[i]
		if raw, err := rt.st.Get(monitorChargeKey(c.ID)); err == nil {
			_, p, _ := strings.Cut(string(raw), " ")
			price, _ := ledger.ParseMC(p)
			out[i] = chargeResult{price: price} // charged before; its ack was lost
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			out[i].err = err
			continue
		}
		u := c.Usage
		// Model tokens are priced too (a Firecrawl extraction's page).
		price, err := rt.Prices().Quote(billing.Usage{Kind: u.Kind, Level: u.EffectiveLevel(), Cache: u.Cache, Count: chargeCount(u),
			InTokens: u.InTokens, OutTokens: u.OutTokens})
		if err != nil {
			out[i].err = err
			continue
		}
		prices[i], fresh[i] = price, true
		b.Set(monitorChargeKey(c.ID), []byte(now.Format(time.RFC3339)+" "+price.String()))
	}
	if err := b.Commit(store.Sync); err != nil {
		for i := range cs {
			if fresh[i] {
				out[i].err, fresh[i] = err, false
			}
		}
	}
	// Charged a few at once: the journal's synced writes then share their
	// syncs (ledger.HoldsClient.journal), where one after the other a
	// crawl's thousand pages would cost a thousand.
	sem := make(chan struct{}, chargeParallel)
	var wg sync.WaitGroup
	for i := range cs {
		if !fresh[i] {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = rt.chargeMarked(ctx, &cs[i], prices[i])
		}()
	}
	wg.Wait()
	return out
}

// chargeParallel bounds the charges of one collection made at once.
const chargeParallel = 16

func chargeCount(u metering.Usage) int {
	if u.Count != nil {
		return *u.Count
	}
	return 1
}

// chargeMarked charges a marked charge at price and records its usage
// line.
func (rt *Runtime) chargeMarked(ctx context.Context, c *monitorCharge, price ledger.MC) chargeResult {
	u := c.Usage
	sum := sha256.Sum256([]byte(c.ID))
	receipt := "r_" + rt.cfg.Region + "_" + hex.EncodeToString(sum[:12])
	if price > 0 {
		if err := rt.Holds().Charge(ctx, c.Account, receipt, price); err != nil {
			return chargeResult{err: err}
		}
	}
	boxes := u.Boxes
	if boxes == nil && u.Engine != "" {
		boxes = []string{u.Engine}
	}
	level := u.EffectiveLevel()
	line := &usage.Line{Receipt: receipt, At: rt.cfg.Now().UTC(), Region: rt.cfg.Region, Account: c.Account,
		Call: u.Kind, URL: c.URL, Engine: u.Engine, Level: level, Cache: u.Cache, Count: chargeCount(u),
		LLMTokens: usage.Tokens{In: u.InTokens, Out: u.OutTokens}, Status: http.StatusOK, Boxes: boxes, Units: billing.Amount(price)}
	if err := rt.usage.Record(line); err != nil {
		rt.cfg.Logger.Warn("monitor charges: usage line not recorded", "receipt", receipt, "err", err)
	}
	return chargeResult{price: price, charged: true}
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
