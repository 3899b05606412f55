package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/trawlhq/trawl/internal/store"
)

// tx applies one command: it reads the committed state (r), keeps what it
// changes in write-back caches so reads see its own writes without an
// indexed batch, and writes everything to b at flush.
type tx struct {
	r    reader
	b    *store.Batch
	meta *Meta
	cmd  *Command
	n    int // entries written by this command

	bals     map[string]MC
	accts    map[string]*Account
	holds    map[string]*Hold // by acct + "/" + region
	receipts map[string]bool  // charged by this command
	plans    *Plans           // set by this command
}

func (t *tx) bal(acct string) (MC, error) {
	if v, ok := t.bals[acct]; ok {
		return v, nil
	}
	v, err := balance(t.r, acct)
	if err != nil {
		return 0, err
	}
	t.bals[acct] = v
	return v, nil
}

func (t *tx) exists(key []byte) (bool, error) {
	_, err := t.r.Get(key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// flush writes the cached balances, accounts and holds to the batch, in
// key order.
func (t *tx) flush() {
	for _, k := range slices.Sorted(maps.Keys(t.bals)) {
		t.b.Set(keyBal(k), encodeBal(t.bals[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(t.accts)) {
		t.putJSON(keyAccount(k), t.accts[k])
	}
	for _, k := range slices.Sorted(maps.Keys(t.holds)) {
		t.putJSON([]byte(store.PrefixLedger+"hold/"+k), t.holds[k])
	}
}

// apply runs cmd against the state in r at raft index, writing to b and
// updating meta. It is deterministic: it reads only the batch and the
// command. On a refusal (Result.Error set) the caller must discard b and
// keep its own copy of meta: a refused command changes nothing.
func apply(r reader, b *store.Batch, meta *Meta, cmd *Command, index uint64) (*Result, error) {
	var prev Result
	if ok, err := getJSON(r, keyCommand(cmd.ID), &prev); err != nil {
		return nil, err
	} else if ok {
		prev.Duplicate = true
		return &prev, nil
	}
	t := newTx(r, b, meta, cmd)
	res := &Result{Index: index}
	if cmd.Type == CmdResetMonth && cmd.ResetMonth != nil && cmd.ResetMonth.Credits != nil {
		// The credits it brings are the ones the month it starts grants.
		t.plans = &Plans{Monthly: cmd.ResetMonth.Credits}
	}
	if err := t.rollMonth(); err != nil {
		return nil, err
	}
	var err error
	switch cmd.Type {
	case CmdCreateAccount:
		err = t.createAccount(cmd.CreateAccount)
	case CmdAddKey:
		err = t.addKey(cmd.AddKey)
	case CmdRevokeKey:
		err = t.revokeKey(cmd.RevokeKey)
	case CmdGrant:
		err = t.grant(cmd.Grant)
	case CmdHold:
		err = t.hold(cmd.Hold, res)
	case CmdSettle:
		err = t.settle(cmd.Settle, res)
	case CmdRelease:
		err = t.release(cmd.Release, res)
	case CmdSettings:
		err = t.settings(cmd.Settings, res)
	case CmdResetMonth:
		err = t.resetMonth(cmd.ResetMonth)
	case CmdTopup:
		err = t.topup(cmd.Topup)
	case CmdExpirePass:
		err = t.expirePass(cmd.ExpirePass)
	case CmdRechargeDone:
		err = t.rechargeDone(cmd.RechargeDone)
	case CmdSetPeer:
		err = t.setPeer(cmd.SetPeer)
	case CmdSetPlans:
		err = t.setPlans(cmd.SetPlans)
	case CmdCompact:
		err = t.compact(cmd.Compact, res)
	case CmdSetCustomer:
		err = t.setCustomer(cmd.SetCustomer)
	case CmdMonitorSlot:
		err = t.monitorSlot(cmd.MonitorSlot) // ledger/monitors.go
	case CmdSetPrices:
		err = t.setPrices(cmd.SetPrices, index) // ledger/prices.go
	case CmdSetRecipe:
		err = t.setRecipe(cmd.SetRecipe, index) // ledger/recipes.go
	case CmdDeleteRecipe:
		err = t.deleteRecipe(cmd.DeleteRecipe, index)
	default:
		err = refuse(ErrCodeInvalid, "unknown command type %q", cmd.Type)
	}
	var ref *refusal
	if errors.As(err, &ref) {
		return &Result{Index: index, Error: ref.code, Message: ref.msg}, nil
	}
	if err == nil {
		t.flush()
	}
	return res, err
}

func newTx(r reader, b *store.Batch, meta *Meta, cmd *Command) *tx {
	return &tx{r: r, b: b, meta: meta, cmd: cmd, bals: map[string]MC{}, accts: map[string]*Account{},
		holds: map[string]*Hold{}, receipts: map[string]bool{}}
}

// rollOnly turns the month for a command that is otherwise refused or a
// repeat: every command in the log carries the ledger's time forward.
func rollOnly(r reader, b *store.Batch, meta *Meta, cmd *Command) error {
	t := newTx(r, b, meta, cmd)
	if err := t.rollMonth(); err != nil {
		return err
	}
	t.flush()
	return nil
}

func (t *tx) putJSON(key []byte, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ledger: encode %s: %v", key, err)) // our own types always encode
	}
	t.b.Set(key, b)
}

// transfer moves amount from debit to credit and journals it.
func (t *tx) transfer(debit, credit string, amount MC, kind, receipt string) error {
	if amount <= 0 {
		return nil
	}
	db, err := t.bal(debit)
	if err != nil {
		return err
	}
	cb, err := t.bal(credit)
	if err != nil {
		return err
	}
	t.bals[debit], t.bals[credit] = db-amount, cb+amount
	t.meta.Entries++
	t.n++
	e := Entry{
		Index:    t.meta.Entries,
		ID:       fmt.Sprintf("%s/%d", t.cmd.ID, t.n),
		Debit:    debit,
		Credit:   credit,
		Amount:   amount,
		Kind:     kind,
		Receipt:  receipt,
		Time:     t.cmd.Time.UTC(),
		PrevHash: t.meta.LastHash,
	}
	if e.PrevHash == "" {
		e.PrevHash = GenesisHash
	}
	e.Hash = e.ComputeHash()
	t.meta.LastHash = e.Hash
	t.putJSON(keyJournal(e.Index), &e)
	return nil
}

// account returns the account for changing: changes are written at flush.
func (t *tx) account(id string) (*Account, error) {
	if a, ok := t.accts[id]; ok {
		return a, nil
	}
	var a Account
	ok, err := getJSON(t.r, keyAccount(id), &a)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse(ErrCodeNoAccount, "no account %q", id)
	}
	t.accts[id] = &a
	return &a, nil
}
