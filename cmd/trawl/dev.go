package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/trawlhq/trawl/ledger"
	"github.com/trawlhq/trawl/ledger/billing"
)

// devLedger is the embedded default's ledger: a one-voter Raft group for
// region eu under DATA/eu/ledger, the billing routes, and a dev account.
type devLedger struct {
	node *ledger.Node
	key  string
}

func startDevLedger(ctx context.Context, dataDir, raftAddr, apiAddr string, logger *slog.Logger) (*devLedger, http.Handler, error) {
	secret := make([]byte, 16)
	rand.Read(secret)
	n, err := ledger.OpenNode(ledger.NodeConfig{
		ID: "eu", DataDir: filepath.Join(dataDir, "eu", "ledger"), RaftAddr: raftAddr,
		Peers:     []ledger.Peer{{ID: "eu", RaftAddr: raftAddr, APIAddr: apiAddr}},
		Bootstrap: true, Secret: hex.EncodeToString(secret), Logger: logger,
	})
	if err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for !n.IsLeader() {
		if time.Now().After(deadline) {
			n.Close()
			return nil, nil, fmt.Errorf("the dev ledger did not elect itself")
		}
		time.Sleep(20 * time.Millisecond)
	}
	prices := billing.DefaultPrices()
	d := &devLedger{node: n, key: os.Getenv("TRAWL_DEV_KEY")}
	if d.key == "" {
		b := make([]byte, 24)
		rand.Read(b)
		d.key = "trawl_dev_" + hex.EncodeToString(b)
	}
	now := time.Now().UTC()
	hash := billing.HashKey(d.key)
	cmds := []*ledger.Command{
		{ID: "dev/account", Type: ledger.CmdCreateAccount, Time: now, CreateAccount: &ledger.CreateAccount{Account: "dev", Plan: ledger.PlanFree}},
		{ID: "dev/signup", Type: ledger.CmdGrant, Time: now, Grant: &ledger.Grant{Account: "dev", Bucket: ledger.BucketSignup, Amount: ledger.MC(prices.Grants.Signup)}},
		{ID: "dev/key/" + hash[:16], Type: ledger.CmdAddKey, Time: now, AddKey: &ledger.Key{ID: "key_dev_" + hash[:12], Account: "dev", Hash: hash, Prefix: d.key[:14], Role: ledger.RoleUser, Kind: "permanent"}},
	}
	for _, c := range cmds {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := n.Submit(sctx, c)
		cancel()
		if err != nil {
			n.Close()
			return nil, nil, err
		}
		if res.Error != "" && res.Error != ledger.ErrCodeExists {
			n.Close()
			return nil, nil, fmt.Errorf("dev ledger: %s: %s", c.ID, res.Message)
		}
	}
	bcfg := billing.Config{State: n.State(), Ledger: n, Prices: prices, Region: "eu", Logger: logger}
	go billing.RunMaintenance(ctx, bcfg, n.IsLeader, time.Minute)
	return d, billing.NewHandler(bcfg), nil
}
