// Package app is the Caddy app "trawl": it opens the gate's runtime (the
// ledger voter, the regional holds client, the cell membership) that the
// gate's handler modules share. The runtime lives in a caddy.UsagePool
// keyed by its data directory, so a config reload keeps the voter, the
// holds and the membership running instead of reopening them.
package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap/exp/zapslog"

	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/signup"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/regionauth"
)

func init() {
	caddy.RegisterModule(App{})
}

// runtimes holds each open runtime by data directory across reloads.
var runtimes = caddy.NewUsagePool()

// App configures the gate's runtime for one region.
type App struct {
	// Region is the gate's region (eu, sin, us).
	Region string `json:"region,omitempty"`
	// Data is the gate's data directory (ledger/ and holds/ inside).
	Data string `json:"data,omitempty"`
	// Addr is the host:port the gate serves on (the address other
	// regions' gates use to reach it).
	Addr string `json:"addr,omitempty"`
	// PublicURL is the region's public base URL (default http://addr).
	PublicURL string `json:"public_url,omitempty"`
	// LedgerRaft is this region's voter's Raft address.
	LedgerRaft string `json:"ledger_raft,omitempty"`
	// LedgerSecret is shared by the voters; placeholders such as
	// {env.TRAWL_LEDGER_SECRET} are expanded.
	LedgerSecret string `json:"ledger_secret,omitempty"`
	// RegionKeys are the region's keys, as TRAWL_REGION_KEYS holds them
	// (placeholders such as {env.TRAWL_REGION_KEYS} are expanded): they
	// encrypt the membership and sign every request to a cell.
	RegionKeys string `json:"region_keys,omitempty"`
	// AllowPrivateNetworks lets the region's cells fetch loopback and
	// private addresses (development and tests only).
	AllowPrivateNetworks bool `json:"allow_private_networks,omitempty"`
	// Peers are the other regions' gates.
	Peers []gate.Peer `json:"peers,omitempty"`
	// Bootstrap forms the Raft group from the peers if Data is new.
	Bootstrap bool `json:"bootstrap,omitempty"`
	// MembersBind is the memberlist address of the gate (host:port).
	MembersBind string `json:"members_bind,omitempty"`
	// MembersJoin are memberlist seeds of the region.
	MembersJoin []string `json:"members_join,omitempty"`
	// Prices is a price table file (default: the built-in table).
	Prices string `json:"prices,omitempty"`
	// SMTP sends sign-up mail; without it each mail is logged instead.
	SMTP *SMTP `json:"smtp,omitempty"`
	// Payments is the top-up provider; without it top-ups answer 503.
	Payments *Payments `json:"payments,omitempty"`

	rt  *gate.Runtime
	key string
}

// Payments is the payment provider of top-ups. Placeholders such as
// {env.TRAWL_STRIPE_SECRET_KEY} are expanded in every field.
type Payments struct {
	// Provider is stripe or local.
	Provider string `json:"provider,omitempty"`
	// SecretKey (stripe) is the secret API key; APIURL its API base
	// (default Stripe's; stripe-mock in tests).
	SecretKey string `json:"secret_key,omitempty"`
	APIURL    string `json:"api_url,omitempty"`
	// ConfirmToken (local) must be typed to confirm a checkout.
	ConfirmToken string `json:"confirm_token,omitempty"`
}

// SMTP is the mail server of sign-up mail. Placeholders such as
// {env.TRAWL_SMTP_PASSWORD} are expanded in every field.
type SMTP struct {
	// Addr is host:port (a submission port, usually 587).
	Addr string `json:"addr,omitempty"`
	// From is the sender ("trawl <noreply@trawl.example>").
	From     string `json:"from,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "trawl", New: func() caddy.Module { return new(App) }}
}

// Provision checks the configuration, then opens the runtime or takes the
// one a previous config opened. The checks come first: Caddy calls Validate
// only after Provision, and by then the ledger voter, the stores and the
// membership would be open.
func (a *App) Provision(ctx caddy.Context) error {
	if err := a.check(); err != nil {
		return err
	}
	repl := caddy.NewReplacer()
	secret := repl.ReplaceAll(a.LedgerSecret, "")
	keys, err := regionauth.ParseKeys(repl.ReplaceAll(a.RegionKeys, ""))
	if err != nil {
		return fmt.Errorf("trawl: region_keys: %w", err)
	}
	a.key = a.Data
	val, _, err := runtimes.LoadOrNew(a.key, func() (caddy.Destructor, error) {
		cfg := gate.Config{
			Region: a.Region, DataDir: a.Data, Addr: a.Addr, PublicURL: a.PublicURL,
			LedgerRaft: a.LedgerRaft, LedgerSecret: secret, Peers: a.Peers, Bootstrap: a.Bootstrap,
			RegionKeys: keys, AllowPrivateNetworks: a.AllowPrivateNetworks,
			Members: members.Config{Bind: a.MembersBind, Join: a.MembersJoin},
			Logger:  slog.New(zapslog.NewHandler(ctx.Logger().Core())),
			// The bootstrap operator key (docs/operations.md, "The
			// operator API"): from the environment, never the Caddyfile.
			OperatorKey: os.Getenv("TRAWL_OPERATOR_KEY"),
		}
		if a.SMTP != nil && a.SMTP.Addr != "" {
			cfg.Mailer = &signup.SMTPMailer{
				Addr: repl.ReplaceAll(a.SMTP.Addr, ""), From: repl.ReplaceAll(a.SMTP.From, ""),
				Username: repl.ReplaceAll(a.SMTP.Username, ""), Password: repl.ReplaceAll(a.SMTP.Password, ""),
			}
		}
		if a.Payments != nil {
			cfg.Payments = gate.Payments{
				Provider:  a.Payments.Provider,
				StripeKey: repl.ReplaceAll(a.Payments.SecretKey, ""), StripeURL: repl.ReplaceAll(a.Payments.APIURL, ""),
				ConfirmToken: repl.ReplaceAll(a.Payments.ConfirmToken, ""),
			}
		}
		if a.Prices != "" {
			p, err := billing.LoadPrices(a.Prices)
			if err != nil {
				return nil, err
			}
			cfg.Prices = p
		}
		return gate.Open(cfg)
	})
	if err != nil {
		a.key = ""
		return fmt.Errorf("trawl: %w", err)
	}
	a.rt = val.(*gate.Runtime)
	if a.rt.Region() != a.Region {
		return fmt.Errorf("trawl: %s already runs region %s; restart to change the region", a.Data, a.rt.Region())
	}
	return nil
}

// Validate checks the configuration (Provision already has).
func (a *App) Validate() error { return a.check() }

var nameRe = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// check is what can be known wrong without opening anything; the Caddyfile
// adapter runs it too, so a bad Caddyfile is refused before it is loaded.
func (a *App) check() error {
	switch {
	case strings.TrimSpace(a.Region) == "":
		return errors.New("trawl: region is required")
	case !nameRe.MatchString(a.Region):
		return fmt.Errorf("trawl: region %q is not [a-z0-9]{1,16}", a.Region)
	case a.Data == "":
		return errors.New("trawl: data is required")
	case a.Addr == "" || a.LedgerRaft == "":
		return errors.New("trawl: addr and ledger_raft are required")
	case strings.TrimSpace(a.RegionKeys) == "":
		return errors.New("trawl: region_keys is required (region_keys {env.TRAWL_REGION_KEYS})")
	}
	for _, p := range a.Peers {
		if !nameRe.MatchString(p.Region) || p.Raft == "" || p.Gate == "" {
			return fmt.Errorf("trawl: peer %q needs a region of [a-z0-9]{1,16}, a raft address and a gate address", p.Region)
		}
	}
	if a.SMTP != nil && a.SMTP.Addr != "" && a.SMTP.From == "" {
		return errors.New("trawl: smtp needs a sender")
	}
	if p := a.Payments; p != nil {
		switch {
		case p.Provider != "stripe" && p.Provider != "local":
			return fmt.Errorf("trawl: payments provider %q is not stripe or local", p.Provider)
		case p.Provider == "stripe" && strings.TrimSpace(p.SecretKey) == "":
			return errors.New("trawl: payments stripe needs a secret key (payments stripe {env.TRAWL_STRIPE_SECRET_KEY})")
		}
	}
	return nil
}

// Start implements caddy.App; the runtime started in Provision.
func (a *App) Start() error { return nil }

// Stop implements caddy.App; the runtime closes in Cleanup when no config
// uses it any more.
func (a *App) Stop() error { return nil }

// Cleanup releases this config's use of the runtime.
func (a *App) Cleanup() error {
	if a.key == "" {
		return nil
	}
	_, err := runtimes.Delete(a.key)
	a.key, a.rt = "", nil
	return err
}

// Runtime is the gate's runtime.
func (a *App) Runtime() *gate.Runtime { return a.rt }

// Runtime returns the runtime of the config ctx belongs to: handler
// modules call it in Provision.
func Runtime(ctx caddy.Context) (*gate.Runtime, error) {
	v, err := ctx.App("trawl")
	if err != nil {
		return nil, fmt.Errorf("the trawl global option block is required: %w", err)
	}
	a := v.(*App)
	if a.rt == nil {
		return nil, errors.New("trawl app is not provisioned")
	}
	return a.rt, nil
}

// RuntimeIfConfigured is Runtime when the config has the trawl app, and
// nil (no error) when it has not: a module that works without the app
// and uses it when it is there.
func RuntimeIfConfigured(ctx caddy.Context) *gate.Runtime {
	v, err := ctx.AppIfConfigured("trawl")
	if err != nil || v == nil {
		return nil
	}
	return v.(*App).rt
}

// Interface guards.
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)

// Running returns the runtime open for the data directory data, for a
// process that embeds the gate (trawl dev) and needs the voter directly.
func Running(data string) (*gate.Runtime, bool) {
	var rt *gate.Runtime
	runtimes.Range(func(k, v any) bool {
		if k == data {
			rt = v.(*gate.Runtime)
			return false
		}
		return true
	})
	return rt, rt != nil
}
