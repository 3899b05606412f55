package ledger

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestAccountKeysAndKeyByID(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", 0)
	newAccount(a, "acct2", 0)
	key := func(id, acct, hashChar string, at time.Time) {
		h := ""
		for range 64 {
			h += hashChar
		}
		a.ok(Command{Type: CmdAddKey, Time: at, AddKey: &Key{ID: id, Account: acct, Hash: h, Role: RoleUser, Kind: "permanent"}})
	}
	key("kb", "acct1", "b", t0.Add(time.Minute))
	key("ka", "acct1", "a", t0.Add(time.Minute)) // same time as kb: by id
	key("kc", "acct1", "c", t0)
	key("kd", "acct2", "d", t0)
	a.ok(Command{Type: CmdRevokeKey, RevokeKey: &RevokeKey{KeyID: "kb"}})

	keys, err := a.s.AccountKeys("acct1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	if !slices.Equal(ids, []string{"kc", "ka", "kb"}) || !keys[2].Revoked {
		t.Fatalf("AccountKeys(acct1) = %v; want [kc ka kb], kb revoked", ids)
	}
	if keys, err := a.s.AccountKeys("nobody"); err != nil || len(keys) != 0 {
		t.Fatalf("AccountKeys(nobody) = %v, %v", keys, err)
	}

	k, err := a.s.KeyByID("kd")
	if err != nil || k.Account != "acct2" || k.Hash[0] != 'd' {
		t.Fatalf("KeyByID(kd) = %+v, %v", k, err)
	}
	if _, err := a.s.KeyByID("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("KeyByID(nope) err = %v, want ErrNotFound", err)
	}
}

func TestAccountsByEmail(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	for _, c := range []CreateAccount{
		{Account: "a2", Email: "Ann@Example.com", Plan: PlanFree},
		{Account: "a1", Email: "ann@example.com", Plan: PlanFree},
		{Account: "b", Email: "bob@example.com", Plan: PlanFree},
		{Account: "c", Plan: PlanFree},
	} {
		a.ok(Command{Type: CmdCreateAccount, CreateAccount: &c})
	}
	for _, tc := range []struct {
		email string
		want  []string
	}{
		{"ann@example.com", []string{"a1", "a2"}},
		{"ANN@EXAMPLE.COM", []string{"a1", "a2"}},
		{"bob@example.com", []string{"b"}},
		{"carl@example.com", nil},
		{"", nil},
	} {
		got, err := a.s.AccountsByEmail(tc.email)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, acct := range got {
			ids = append(ids, acct.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("AccountsByEmail(%q) = %v, want %v", tc.email, ids, tc.want)
		}
	}
}
