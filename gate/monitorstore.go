package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/webhook"
	"github.com/trawlhq/trawl/ledger"
)

// The region's monitor store (internal/monstore, docs/monitors.md): the
// gate's Pebble store holds every monitor of the region — records,
// versions, timelines, charges, pending webhook deliveries — so no cell's
// disk holds anything a monitor needs. The region's cells reach it at
// /monitor-store/ with requests signed with the region's keys; the gate
// hands out due checks by rendezvous hashing over its live cells, takes
// each new monitor's place under the account-wide limits in the ledger
// (monitor_slot, counted in Raft order, so every region sees the same
// numbers), and sends the webhooks of confirmed changes from its store:
// one sender for the region, so a delivery is never sent by two cells.

type monitorStore struct {
	local  *monstore.Local
	server *monstore.Server
	hooks  *webhook.Sender
}

// startMonitorStore opens the monitor store on the gate's store and starts
// its webhook sender until ctx ends.
func (rt *Runtime) startMonitorStore(ctx context.Context) error {
	ms := &monitorStore{}
	// The membership as it is now: Close clears rt.members while the
	// cells may still be asking for claims.
	cluster, region := rt.members, rt.cfg.Region
	ms.local = monstore.NewLocal(rt.st, monstore.LocalConfig{
		Live: func() []string {
			cells := cluster.Live(members.RoleCell, region)
			names := make([]string, 0, len(cells))
			for _, c := range cells {
				names = append(names, c.Name)
			}
			return names
		},
		Slots: rt.monitorSlot,
		OnHook: func() {
			if ms.hooks != nil {
				ms.hooks.Kick()
			}
		},
	})
	var err error
	ms.hooks, err = webhook.New(rt.st, webhook.Config{
		Prefix:               store.PrefixMonitorHook,
		AllowPrivateNetworks: rt.cfg.AllowPrivateNetworks,
		// Each delivery carries its cell's retry ladder (--webhook-retries).
		Now: rt.cfg.Now,
		OnFinish: func(d webhook.Delivery) {
			ms.local.RecordDelivery(d.ID, d.Delivered, d.Attempts, d.LastStatus, rt.cfg.Now())
		},
		Logger: rt.cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("gate: monitor webhooks: %w", err)
	}
	// Signatures are checked against real time: a cell signs with its
	// own real clock, whatever clock its monitors run on.
	ms.server = monstore.NewServer(ms.local, regionauth.NewVerifier(rt.cfg.RegionKeys, time.Now), rt.cfg.Logger)
	rt.monitors = ms
	// notify.email goes through the sign-up mail's SMTP settings; a gate
	// without them records each monitor mail as failed.
	var mailer monstore.Mailer
	if rt.cfg.Mailer != nil {
		mailer = rt.cfg.Mailer
	}
	rt.bg.Add(2)
	go func() {
		defer rt.bg.Done()
		ms.hooks.Run(ctx)
	}()
	go func() {
		defer rt.bg.Done()
		ms.local.RunMail(ctx, monstore.MailConfig{Mailer: mailer, Now: rt.cfg.Now, Logger: rt.cfg.Logger})
	}()
	return nil
}

// MonitorHooks is the region's webhook sender of monitor changes (tests
// kick it after moving a clock).
func (rt *Runtime) MonitorHooks() *webhook.Sender { return rt.monitors.hooks }

// monitorSlot takes, changes or gives back a monitor's place under the
// account-wide limits: the ledger's monitor_slot command.
func (rt *Runtime) monitorSlot(ctx context.Context, s *monstore.Slot) error {
	var id [12]byte
	rand.Read(id[:])
	cmd := &ledger.Command{ID: "monslot_" + hex.EncodeToString(id[:]), Type: ledger.CmdMonitorSlot, Time: rt.cfg.Now().UTC(),
		MonitorSlot: &ledger.MonitorSlot{Op: s.Op, Monitor: s.Monitor, Account: s.Account, Host: s.Host, Fast: s.Fast,
			Limits: ledger.MonitorLimits{Account: s.Limits.Account, Fast: s.Limits.Fast, Host: s.Limits.Host}}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := rt.node.Submit(ctx, cmd)
	if err != nil {
		return fmt.Errorf("monitor limits: %w", err)
	}
	if res.Error == ledger.ErrCodeInvalid && s.Op == ledger.MonitorSet {
		// A monitor made before its place was kept in the ledger: it
		// takes one now.
		add := *s
		add.Op = ledger.MonitorAdd
		return rt.monitorSlot(ctx, &add)
	}
	switch res.Error {
	case "":
		return nil
	case ledger.ErrCodeMonitorLimit:
		return &monstore.LimitError{Message: res.Message}
	case ledger.ErrCodeExists:
		return nil // its place was taken by an earlier try of the same write
	}
	return errors.New("monitor limits: " + res.Message)
}
