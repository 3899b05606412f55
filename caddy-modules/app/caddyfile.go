package app

import (
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/trawlhq/trawl/gate"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("trawl", parseGlobal)
}

// parseGlobal reads the global trawl block:
//
//	trawl {
//		region        eu
//		data          ./data/eu/gate
//		addr          127.0.0.1:8081
//		public_url    https://eu.trawl.example
//		ledger_raft   127.0.0.1:7001
//		ledger_secret {env.TRAWL_LEDGER_SECRET}
//		region_keys   {env.TRAWL_REGION_KEYS}
//		allow_private_networks
//		peer          sin 127.0.0.1:7002 127.0.0.1:8082
//		bootstrap
//		members_bind  127.0.0.1:7946
//		members_join  127.0.0.1:7950 ...
//		prices        /etc/trawl/prices.json
//		smtp          smtp.example.com:587 "trawl <noreply@trawl.example>" {env.TRAWL_SMTP_USERNAME} {env.TRAWL_SMTP_PASSWORD}
//		payments      stripe {env.TRAWL_STRIPE_SECRET_KEY} [api_url]
//		payments      local [confirm_token]
//	}
func parseGlobal(d *caddyfile.Dispenser, _ any) (any, error) {
	a := new(App)
	if err := a.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, d.Err(err.Error())
	}
	return httpcaddyfile.App{Name: "trawl", Value: caddyconfig.JSON(a, nil)}, nil
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		key := d.Val()
		one := func(dst *string) error {
			if !d.NextArg() {
				return d.ArgErr()
			}
			*dst = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
			return nil
		}
		var err error
		switch key {
		case "region":
			err = one(&a.Region)
		case "data":
			err = one(&a.Data)
		case "addr":
			err = one(&a.Addr)
		case "public_url":
			err = one(&a.PublicURL)
		case "ledger_raft":
			err = one(&a.LedgerRaft)
		case "ledger_secret":
			err = one(&a.LedgerSecret)
		case "region_keys":
			err = one(&a.RegionKeys)
		case "allow_private_networks":
			if d.NextArg() {
				return d.ArgErr()
			}
			a.AllowPrivateNetworks = true
		case "prices":
			err = one(&a.Prices)
		case "members_bind":
			err = one(&a.MembersBind)
		case "members_join":
			a.MembersJoin = append(a.MembersJoin, d.RemainingArgs()...)
			if len(a.MembersJoin) == 0 {
				return d.ArgErr()
			}
		case "smtp":
			args := d.RemainingArgs()
			if len(args) != 2 && len(args) != 4 {
				return d.Errf("smtp wants: addr from [username password]")
			}
			a.SMTP = &SMTP{Addr: args[0], From: args[1]}
			if len(args) == 4 {
				a.SMTP.Username, a.SMTP.Password = args[2], args[3]
			}
		case "payments":
			args := d.RemainingArgs()
			switch {
			case len(args) >= 2 && len(args) <= 3 && args[0] == "stripe":
				a.Payments = &Payments{Provider: "stripe", SecretKey: args[1]}
				if len(args) == 3 {
					a.Payments.APIURL = args[2]
				}
			case len(args) >= 1 && len(args) <= 2 && args[0] == "local":
				a.Payments = &Payments{Provider: "local"}
				if len(args) == 2 {
					a.Payments.ConfirmToken = args[1]
				}
			default:
				return d.Errf("payments wants: stripe secret_key [api_url], or local [confirm_token]")
			}
		case "bootstrap":
			if d.NextArg() {
				return d.ArgErr()
			}
			a.Bootstrap = true
		case "peer":
			args := d.RemainingArgs()
			if len(args) != 3 {
				return d.Errf("peer wants: region raft_addr gate_addr")
			}
			a.Peers = append(a.Peers, gate.Peer{Region: args[0], Raft: args[1], Gate: args[2]})
		default:
			return d.Errf("unknown trawl option %q", key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*App)(nil)

// NoOptions reads a directive that takes no arguments and no block (the
// gate's handler directives other than trawl_auth and trawl_ratelimit).
func NoOptions(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() || d.NextBlock(0) {
		return d.ArgErr()
	}
	return nil
}
