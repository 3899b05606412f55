package gate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/ledger"
)

// The operator API (docs/operations.md, "The operator API"): the rows of
// internal/routes under /operator/v1/, answered by this gate for its region's
// cells and, through the ledger, for every region's accounts, keys, plans
// and price table. Their rows need the operator role (ledger.RoleOperator):
// trawl_auth answers a customer's key 403, no key 401, and a request
// another region's gate forwarded 403, before the body is read; the gate's
// mux checks the role again from the row (requireRole, gate/routes.go).

// OperatorAccount is the account the gate's bootstrap operator key
// (TRAWL_OPERATOR_KEY) belongs to.
const OperatorAccount = "operator"

// Error codes of the operator API, besides billing's.
const (
	// CodeCellLive (409): a live cell cannot be removed; stop it first.
	CodeCellLive = "cell_live"
	// CodePriceConflict (409): the price table changed since the version
	// the change was made from.
	CodePriceConflict = "conflict"
	// CodeExists (409): an account of that id exists.
	CodeExists = "exists"
)

// CellInfo is a cell as the operator API shows it.
type CellInfo struct {
	Name string `json:"name"`
	// API is its address as membership saw it last.
	API string `json:"api"`
	// Live: a member of the region now.
	Live bool `json:"live"`
	// Drained: no new work is sent to it; its own objects (jobs,
	// monitors) are still answered by it.
	Drained bool `json:"drained"`
	// JetStream is a live clustered cell's embedded JetStream node as its
	// membership tells it (nil for a standalone node or a cell not live);
	// the node's full state is in the cell's /health.
	JetStream *CellJetStream `json:"jetstream,omitempty"`
}

// CellJetStream is a cell's JetStream route and join state (members.Meta).
type CellJetStream struct {
	Route string `json:"route"`
	// State is waiting (for its turn to join the region's meta group),
	// joining, or ready (in the meta group).
	State string `json:"state"`
	// Work is the cell's part of the region's job queue, once it shares
	// job URLs (a few seconds old, from membership).
	Work *members.Work `json:"work,omitempty"`
}

// CellList is GET /operator/v1/cells.
type CellList struct {
	Region string     `json:"region"`
	Cells  []CellInfo `json:"cells"`
}

// OperatorKey is a key as the operator API shows it; Key (the secret) is
// only in the answer that created it.
type OperatorKey struct {
	ID        string     `json:"id"`
	Account   string     `json:"account"`
	Name      string     `json:"name,omitempty"`
	Prefix    string     `json:"prefix"`
	Role      string     `json:"role"`
	Kind      string     `json:"kind"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	Revoked   bool       `json:"revoked"`
	Key       string     `json:"key,omitempty"`
}

// PriceTableBody is GET and PUT /operator/v1/prices: the table and its
// version (0: the gate's file or the built-in table, never changed through
// the ledger). A PUT names the version it read; a table changed since is
// 409 conflict.
type PriceTableBody struct {
	Version uint64          `json:"version"`
	Table   *billing.Prices `json:"table"`
}

// PlanBody is one plan in GET /operator/v1/plans and the body of PUT
// /operator/v1/plans/{plan}: its limits and its monthly credit, which live
// in the price table.
type PlanBody struct {
	RatePerMinute  int            `json:"rate_per_minute"`
	Concurrency    int            `json:"concurrency"`
	Keys           int            `json:"keys"`
	MonthlyCap     billing.Amount `json:"monthly_cap"`
	MonthlyCredits billing.Amount `json:"monthly_credits"`
}

// PlansBody is GET /operator/v1/plans.
type PlansBody struct {
	Version uint64              `json:"version"`
	Plans   map[string]PlanBody `json:"plans"`
}

var (
	accountRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	cellRe    = regexp.MustCompile(`^[a-z0-9]{1,16}$`)
)

// operatorHandlers are the operator rows' handlers. Each reads its body
// within its row's BodyLimit (routes.Limit).
func (rt *Runtime) operatorHandlers() routes.Handlers {
	return routes.Handlers{
		"GET /operator/v1/cells":                           http.HandlerFunc(rt.opCells),
		"POST /operator/v1/cells/{name}/drain":             rt.opDrain(true),
		"DELETE /operator/v1/cells/{name}/drain":           rt.opDrain(false),
		"DELETE /operator/v1/cells/{name}":                 http.HandlerFunc(rt.opRemoveCell),
		"POST /operator/v1/accounts":                       http.HandlerFunc(rt.opCreateAccount),
		"GET /operator/v1/accounts/{account}":              http.HandlerFunc(rt.opAccount),
		"POST /operator/v1/accounts/{account}/grants":      http.HandlerFunc(rt.opGrant),
		"GET /operator/v1/accounts/{account}/keys":         http.HandlerFunc(rt.opKeys),
		"POST /operator/v1/accounts/{account}/keys":        http.HandlerFunc(rt.opCreateKey),
		"DELETE /operator/v1/accounts/{account}/keys/{id}": http.HandlerFunc(rt.opRevokeKey),
		"GET /operator/v1/prices":                          http.HandlerFunc(rt.opPrices),
		"PUT /operator/v1/prices":                          http.HandlerFunc(rt.opSetPrices),
		"GET /operator/v1/plans":                           http.HandlerFunc(rt.opPlans),
		"PUT /operator/v1/plans/{plan}":                    http.HandlerFunc(rt.opSetPlan),
		"GET /operator/v1/recipes":                         http.HandlerFunc(rt.opRecipes), // gate/operator_recipes.go
		"GET /operator/v1/recipes/{name}":                  http.HandlerFunc(rt.opRecipe),
		"PUT /operator/v1/recipes/{name}":                  http.HandlerFunc(rt.opSetRecipe),
		"DELETE /operator/v1/recipes/{name}":               http.HandlerFunc(rt.opDeleteRecipe),
		"/operator/": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no such operator route: "+r.Method+" "+r.URL.Path)
		}),
	}
}

// opDecode reads the JSON body of r into v within its row's BodyLimit, or
// answers the refusal and returns false.
func opDecode(w http.ResponseWriter, r *http.Request, v any) bool {
	err := httpjson.Decode(w, r, routes.Limit(r), v)
	if err == nil {
		return true
	}
	if de, ok := errors.AsType[*httpjson.DecodeError](err); ok {
		httpjson.Error(w, de.Status(), de.Code(), de.Error())
	} else {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, err.Error())
	}
	return false
}

// publishDrained puts the drained cells in the gate's membership meta:
// a drained clustered cell stops taking work from the region's queues
// (cell/jetstream.go).
func (rt *Runtime) publishDrained() error {
	var names []string
	err := rt.st.Scan([]byte(store.PrefixDrained), nil, func(k, _ []byte) (bool, error) {
		names = append(names, string(k[len(store.PrefixDrained):]))
		return true, nil
	})
	if err != nil {
		return err
	}
	return rt.members.UpdateMeta(func(m *members.Meta) { m.Drained = strings.Join(names, ",") })
}

// drained reports whether an operator drained the cell.
func (rt *Runtime) drained(name string) bool {
	_, err := rt.st.Get([]byte(store.PrefixDrained + name))
	return err == nil
}

// WorkCells are the live cells new work may go to: Cells without the ones
// an operator drained. A drained cell still answers for the objects it
// owns (Cells).
// StandIn is the live cell that answers for object id of cell owner
// while owner is not live, from the region's job log: one whose
// JetStream node is ready, picked by Rendezvous over the id, so every
// gate sends the calls about one object to the same cell. False when
// there is none (the region is not clustered) or owner is live. An id
// that names no cell (owner "": a region's job id) goes to the cell
// Rendezvous places it on, the one that minted it while the region's
// cells do not change (jobid.NewPlaced).
func (rt *Runtime) StandIn(owner, id string) (members.Meta, bool) {
	cells := rt.Cells()
	for _, c := range cells {
		if owner != "" && c.Name == owner {
			return members.Meta{}, false
		}
	}
	return members.Rendezvous(members.Placed(cells), id)
}

func (rt *Runtime) WorkCells() []members.Meta {
	var out []members.Meta
	for _, c := range rt.Cells() {
		if !rt.drained(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

func (rt *Runtime) cellList() ([]CellInfo, error) {
	byName := map[string]*CellInfo{}
	err := rt.st.Scan([]byte(store.PrefixCells), nil, func(k, v []byte) (bool, error) {
		name := string(k[len(store.PrefixCells):])
		byName[name] = &CellInfo{Name: name, API: string(v)}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, c := range rt.Cells() {
		ci := &CellInfo{Name: c.Name, API: c.API, Live: true}
		if c.Routes != "" {
			ci.JetStream = &CellJetStream{Route: c.Routes, State: c.JS, Work: c.Work}
		}
		byName[c.Name] = ci
	}
	out := make([]CellInfo, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		ci := byName[name]
		ci.Drained = rt.drained(name)
		out = append(out, *ci)
	}
	return out, nil
}

func (rt *Runtime) opInternal(w http.ResponseWriter, what string, err error) {
	rt.cfg.Logger.Error("operator: "+what, "err", err)
	httpjson.Error(w, http.StatusInternalServerError, billing.CodeInternal, "something went wrong on our side; try again")
}

// GET /operator/v1/cells
func (rt *Runtime) opCells(w http.ResponseWriter, r *http.Request) {
	cells, err := rt.cellList()
	if err != nil {
		rt.opInternal(w, "cells", err)
		return
	}
	httpjson.Write(w, http.StatusOK, CellList{Region: rt.cfg.Region, Cells: cells})
}

func (rt *Runtime) findCell(w http.ResponseWriter, name string) (CellInfo, bool) {
	if !cellRe.MatchString(name) {
		httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no cell "+name+" in region "+rt.cfg.Region)
		return CellInfo{}, false
	}
	cells, err := rt.cellList()
	if err != nil {
		rt.opInternal(w, "cells", err)
		return CellInfo{}, false
	}
	for _, c := range cells {
		if c.Name == name {
			return c, true
		}
	}
	httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no cell "+name+" in region "+rt.cfg.Region)
	return CellInfo{}, false
}

// POST and DELETE /operator/v1/cells/{name}/drain
func (rt *Runtime) opDrain(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if _, ok := rt.findCell(w, name); !ok {
			return
		}
		k := []byte(store.PrefixDrained + name)
		var err error
		if on {
			err = rt.st.Set(k, []byte(rt.cfg.Now().UTC().Format(time.RFC3339)), store.Sync)
		} else {
			err = rt.st.Delete(k, store.Sync)
		}
		if err != nil {
			rt.opInternal(w, "drain", err)
			return
		}
		rt.cfg.Logger.Info("operator: cell drain", "cell", name, "drained", on)
		if err := rt.publishDrained(); err != nil {
			rt.cfg.Logger.Warn("operator: drained cells not told (they are at the next change)", "err", err)
		}
		c, _ := rt.findCell(w, name)
		httpjson.Write(w, http.StatusOK, c)
	}
}

// DELETE /operator/v1/cells/{name}: the region forgets a cell that is
// down for good; ids naming it answer 404 from then on.
func (rt *Runtime) opRemoveCell(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	c, ok := rt.findCell(w, name)
	if !ok {
		return
	}
	if c.Live {
		httpjson.Error(w, http.StatusConflict, CodeCellLive, "cell "+name+" is live: stop it first (drain it, wait for its jobs, then SIGTERM); a removed cell's jobs and monitors are gone")
		return
	}
	b := rt.st.NewBatch()
	b.Delete([]byte(store.PrefixCells + name))
	b.Delete([]byte(store.PrefixDrained + name))
	if err := b.Commit(store.Sync); err != nil {
		rt.opInternal(w, "remove cell", err)
		return
	}
	rt.cfg.Logger.Warn("operator: cell removed from the region", "cell", name)
	w.WriteHeader(http.StatusNoContent)
}

// submit sends cmd to the ledger and waits until this replica has applied
// it, so the answer and the next read agree.
func (rt *Runtime) opSubmit(ctx context.Context, cmd *ledger.Command) (*ledger.Result, error) {
	if cmd.Time.IsZero() {
		cmd.Time = rt.cfg.Now().UTC()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := rt.node.Submit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	for rt.node.State().Meta().AppliedIndex < res.Index {
		select {
		case <-ctx.Done():
			return res, nil
		case <-time.After(2 * time.Millisecond):
		}
	}
	return res, nil
}

func (rt *Runtime) opLedgerError(w http.ResponseWriter, what string, err error) {
	rt.cfg.Logger.Warn("operator: ledger "+what, "err", err)
	httpjson.Error(w, http.StatusServiceUnavailable, billing.CodeLedger, "the ledger did not answer; try again in a few seconds")
}

type createAccountRequest struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Plan  string `json:"plan"`
}

// POST /operator/v1/accounts
func (rt *Runtime) opCreateAccount(w http.ResponseWriter, r *http.Request) {
	var req createAccountRequest
	if !opDecode(w, r, &req) {
		return
	}
	if req.Plan == "" {
		req.Plan = ledger.PlanFree
	}
	if !accountRe.MatchString(req.ID) || (req.Plan != ledger.PlanFree && req.Plan != ledger.PlanSupporter) {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "id must be 1 to 64 of A-Z a-z 0-9 _ -; plan free or supporter")
		return
	}
	res, err := rt.opSubmit(r.Context(), &ledger.Command{ID: "operator/account/" + req.ID, Type: ledger.CmdCreateAccount,
		CreateAccount: &ledger.CreateAccount{Account: req.ID, Email: req.Email, Plan: req.Plan}})
	if err != nil {
		rt.opLedgerError(w, "create account", err)
		return
	}
	if res.Error != "" || res.Duplicate {
		httpjson.Error(w, http.StatusConflict, CodeExists, "account "+req.ID+" exists")
		return
	}
	a, err := rt.node.State().Account(req.ID)
	if err != nil {
		rt.opInternal(w, "read account", err)
		return
	}
	httpjson.Write(w, http.StatusCreated, a)
}

// account finds {account}, or answers 404.
func (rt *Runtime) opFindAccount(w http.ResponseWriter, r *http.Request) (*ledger.Account, bool) {
	id := r.PathValue("account")
	a, err := rt.node.State().Account(id)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && a == nil) {
		httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no account "+id)
		return nil, false
	}
	if err != nil {
		rt.opInternal(w, "account", err)
		return nil, false
	}
	return a, true
}

// GET /operator/v1/accounts/{account}
func (rt *Runtime) opAccount(w http.ResponseWriter, r *http.Request) {
	if a, ok := rt.opFindAccount(w, r); ok {
		a.WebhookSecret = "" // the account's own, never an operator's to read
		httpjson.Write(w, http.StatusOK, a)
	}
}

func opKeyView(k *ledger.Key) OperatorKey {
	ok := OperatorKey{ID: k.ID, Account: k.Account, Name: k.Name, Prefix: k.Prefix, Role: k.Role, Kind: k.Kind,
		CreatedAt: k.CreatedAt.UTC(), Revoked: k.Revoked}
	if !k.ExpiresAt.IsZero() {
		e := k.ExpiresAt.UTC()
		ok.ExpiresAt = &e
	}
	return ok
}

// GET /operator/v1/accounts/{account}/keys
func (rt *Runtime) opKeys(w http.ResponseWriter, r *http.Request) {
	a, ok := rt.opFindAccount(w, r)
	if !ok {
		return
	}
	keys, err := rt.node.State().AccountKeys(a.ID)
	if err != nil {
		rt.opInternal(w, "keys", err)
		return
	}
	out := struct {
		Keys []OperatorKey `json:"keys"`
	}{Keys: []OperatorKey{}}
	for _, k := range keys {
		out.Keys = append(out.Keys, opKeyView(k))
	}
	httpjson.Write(w, http.StatusOK, out)
}

type createKeyRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// KeyPrefix starts every key (gate/signup's).
const keyPrefix = "trawl_"

// POST /operator/v1/accounts/{account}/keys: a permanent key of any role,
// outside the plan's key limit (an operator's decision).
func (rt *Runtime) opCreateKey(w http.ResponseWriter, r *http.Request) {
	a, ok := rt.opFindAccount(w, r)
	if !ok {
		return
	}
	var req createKeyRequest
	if r.ContentLength != 0 {
		if !opDecode(w, r, &req) {
			return
		}
	}
	if req.Role == "" {
		req.Role = ledger.RoleUser
	}
	if req.Role != ledger.RoleUser && req.Role != ledger.RoleAuditor && req.Role != ledger.RoleOperator {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "role must be user, auditor or operator")
		return
	}
	if len(req.Name) > 64 || strings.IndexFunc(req.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "name must be at most 64 printable characters")
		return
	}
	secret := keyPrefix + randHex(32)
	k := &ledger.Key{ID: "key_" + randHex(10), Account: a.ID, Hash: billing.HashKey(secret), Prefix: secret[:len(keyPrefix)+8],
		Role: req.Role, Kind: "permanent", Name: req.Name}
	res, err := rt.opSubmit(r.Context(), &ledger.Command{ID: "operator/key/" + k.ID, Type: ledger.CmdAddKey, AddKey: k})
	if err != nil {
		rt.opLedgerError(w, "add key", err)
		return
	}
	if res.Error != "" {
		rt.opInternal(w, "add key", fmt.Errorf("%s: %s", res.Error, res.Message))
		return
	}
	stored, err := rt.node.State().KeyByID(k.ID)
	if err != nil {
		rt.opInternal(w, "read back key", err)
		return
	}
	v := opKeyView(stored)
	v.Key = secret
	rt.cfg.Logger.Info("operator: key created", "account", a.ID, "key", k.ID, "role", k.Role)
	httpjson.Write(w, http.StatusCreated, v)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// DELETE /operator/v1/accounts/{account}/keys/{id}: revoked for good (a
// repeat is 204 too). A key of another account is 404.
func (rt *Runtime) opRevokeKey(w http.ResponseWriter, r *http.Request) {
	a, ok := rt.opFindAccount(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	k, err := rt.node.State().KeyByID(id)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && k.Account != a.ID) {
		httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no key "+id+" on account "+a.ID)
		return
	}
	if err != nil {
		rt.opInternal(w, "read key", err)
		return
	}
	if self := IdentityFrom(r.Context()); self != nil && self.Key != nil && self.Key.ID == id {
		httpjson.Error(w, http.StatusConflict, "self", "this request is made with that key: revoke it with another operator key")
		return
	}
	if !k.Revoked {
		res, err := rt.opSubmit(r.Context(), &ledger.Command{ID: "operator/revoke/" + id, Type: ledger.CmdRevokeKey, RevokeKey: &ledger.RevokeKey{KeyID: id}})
		if err != nil {
			rt.opLedgerError(w, "revoke key", err)
			return
		}
		if res.Error != "" {
			rt.opInternal(w, "revoke key", fmt.Errorf("%s: %s", res.Error, res.Message))
			return
		}
		rt.cfg.Logger.Info("operator: key revoked", "account", a.ID, "key", id)
	}
	w.WriteHeader(http.StatusNoContent)
}

// priceVersion is the version of the table in force.
func (rt *Runtime) priceVersion() uint64 { return rt.priceVer.Load() }

// GET /operator/v1/prices
func (rt *Runtime) opPrices(w http.ResponseWriter, r *http.Request) {
	rt.syncPrices()
	httpjson.Write(w, http.StatusOK, PriceTableBody{Version: rt.priceVersion(), Table: rt.Prices()})
}

type setPricesRequest struct {
	Version uint64          `json:"version"`
	Table   json.RawMessage `json:"table"`
}

// PUT /operator/v1/prices: the whole table (laid over the built-in one, as
// a --prices file), validated, replicated through the ledger to every
// region.
func (rt *Runtime) opSetPrices(w http.ResponseWriter, r *http.Request) {
	var req setPricesRequest
	if !opDecode(w, r, &req) {
		return
	}
	if len(req.Table) == 0 {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "table is required: the whole price table (GET /operator/v1/prices)")
		return
	}
	p, err := billing.ParsePrices(bytes.NewReader(req.Table))
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "table: "+err.Error())
		return
	}
	rt.putPrices(w, r, req.Version, p)
}

func (rt *Runtime) putPrices(w http.ResponseWriter, r *http.Request, version uint64, p *billing.Prices) {
	raw, err := json.Marshal(p)
	if err != nil {
		rt.opInternal(w, "encode prices", err)
		return
	}
	res, err := rt.opSubmit(r.Context(), &ledger.Command{ID: "operator/prices/" + randHex(10), Type: ledger.CmdSetPrices,
		SetPrices: &ledger.SetPrices{Table: raw, Version: version}})
	if err != nil {
		rt.opLedgerError(w, "set prices", err)
		return
	}
	if res.Error == ledger.ErrCodeConflict {
		httpjson.Error(w, http.StatusConflict, CodePriceConflict, "the price table changed since version "+fmt.Sprint(version)+": read it again and repeat the change")
		return
	}
	if res.Error != "" {
		rt.opInternal(w, "set prices", fmt.Errorf("%s: %s", res.Error, res.Message))
		return
	}
	rt.syncPrices()
	rt.cfg.Logger.Info("operator: price table changed", "version", rt.priceVersion())
	httpjson.Write(w, http.StatusOK, PriceTableBody{Version: rt.priceVersion(), Table: rt.Prices()})
}

// GET /operator/v1/plans
func (rt *Runtime) opPlans(w http.ResponseWriter, r *http.Request) {
	rt.syncPrices()
	p := rt.Prices()
	out := PlansBody{Version: rt.priceVersion(), Plans: map[string]PlanBody{}}
	for name, l := range p.Plans {
		out.Plans[name] = PlanBody{RatePerMinute: l.RatePerMinute, Concurrency: l.Concurrency, Keys: l.Keys,
			MonthlyCap: l.MonthlyCap, MonthlyCredits: p.Grants.Monthly[name]}
	}
	httpjson.Write(w, http.StatusOK, out)
}

type setPlanRequest struct {
	Version uint64 `json:"version"`
	PlanBody
}

// PUT /operator/v1/plans/{plan}: one plan's limits and monthly credit,
// a change of the price table (version as PUT /operator/v1/prices).
func (rt *Runtime) opSetPlan(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("plan")
	cur := rt.Prices()
	if _, ok := cur.Plans[name]; !ok {
		httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no plan "+name+" (plans: free, supporter)")
		return
	}
	var req setPlanRequest
	if !opDecode(w, r, &req) {
		return
	}
	if req.RatePerMinute < 0 || req.Concurrency < 0 || req.Keys < 0 || req.MonthlyCap < 0 || req.MonthlyCredits < 0 {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "limits and credits must not be negative (0: no limit)")
		return
	}
	// A copy of the table with the plan changed: the one in force is
	// shared and never written.
	raw, err := json.Marshal(cur)
	if err != nil {
		rt.opInternal(w, "encode prices", err)
		return
	}
	p, err := billing.ParsePrices(bytes.NewReader(raw))
	if err != nil {
		rt.opInternal(w, "copy prices", err)
		return
	}
	p.Plans[name] = billing.PlanLimits{RatePerMinute: req.RatePerMinute, Concurrency: req.Concurrency, Keys: req.Keys, MonthlyCap: req.MonthlyCap}
	if p.Grants.Monthly == nil {
		p.Grants.Monthly = map[string]billing.Amount{}
	}
	p.Grants.Monthly[name] = req.MonthlyCredits
	if err := p.Validate(); err != nil {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, err.Error())
		return
	}
	rt.putPrices(w, r, req.Version, p)
}

// syncPrices puts the ledger's price table in force when it is newer than
// the one in force. A table that no longer parses (written by a newer
// version) is logged and left aside.
func (rt *Runtime) syncPrices() {
	pt, ok, err := rt.node.State().PriceTable()
	if err != nil || !ok {
		if err != nil {
			rt.cfg.Logger.Warn("operator: read the replicated price table", "err", err)
		}
		return
	}
	rt.priceMu.Lock()
	defer rt.priceMu.Unlock()
	if pt.Version <= rt.priceVer.Load() {
		return
	}
	p, err := billing.ParsePrices(bytes.NewReader(pt.Table))
	if err != nil {
		rt.cfg.Logger.Error("operator: the replicated price table does not parse; keeping the one in force", "version", pt.Version, "err", err)
		rt.priceVer.Store(pt.Version)
		return
	}
	rt.prices.Store(p)
	rt.priceVer.Store(pt.Version)
}

// followPrices keeps the table in force up with the ledger's (a change
// another region's operator made), every interval until ctx ends.
func (rt *Runtime) followPrices(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rt.syncPrices()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ensureOperatorKey makes the bootstrap operator key (TRAWL_OPERATOR_KEY):
// the operator account and the key, with fixed command ids so every gate
// and every restart sends the same commands. It retries until the ledger
// takes them or ctx ends.
func (rt *Runtime) ensureOperatorKey(ctx context.Context, key string) {
	if err := EnsureOperatorKey(ctx, rt.node, key, rt.cfg.Now); err != nil && ctx.Err() == nil {
		rt.cfg.Logger.Error("operator: the bootstrap operator key was not added", "err", err)
	}
}

// EnsureOperatorKey adds the operator account and key to the ledger
// through n, retrying while the group has no leader. Repeating it changes
// nothing.
func EnsureOperatorKey(ctx context.Context, n *ledger.Node, key string, now func() time.Time) error {
	if len(key) < 16 {
		return errors.New("the operator key must be at least 16 characters")
	}
	hash := billing.HashKey(key)
	t := now().UTC()
	cmds := []*ledger.Command{
		{ID: "operator/bootstrap/account", Type: ledger.CmdCreateAccount, Time: t,
			CreateAccount: &ledger.CreateAccount{Account: OperatorAccount, Plan: ledger.PlanSupporter}},
		{ID: "operator/bootstrap/key/" + hash[:16], Type: ledger.CmdAddKey, Time: t,
			AddKey: &ledger.Key{ID: "key_op_" + hash[:12], Account: OperatorAccount, Hash: hash, Prefix: key[:min(len(key), 14)],
				Role: ledger.RoleOperator, Kind: "permanent", Name: "bootstrap (TRAWL_OPERATOR_KEY)"}},
	}
	for _, c := range cmds {
		for {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, err := n.Submit(sctx, c)
			cancel()
			if err == nil {
				if res.Error != "" && res.Error != ledger.ErrCodeExists {
					return fmt.Errorf("%s: %s: %s", c.ID, res.Error, res.Message)
				}
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return nil
}

type grantRequest struct {
	// ID makes the grant idempotent (a refund's receipt): the same id is
	// granted once however often it is sent. Empty: a new grant each time.
	ID      string         `json:"id"`
	Credits billing.Amount `json:"credits"`
	// Bucket is signup (never expires; the default) or monthly (lapses at
	// the month's end).
	Bucket string `json:"bucket"`
}

// POST /operator/v1/accounts/{account}/grants: free credit for an account
// (a refund, a goodwill grant), journaled like every grant.
func (rt *Runtime) opGrant(w http.ResponseWriter, r *http.Request) {
	a, ok := rt.opFindAccount(w, r)
	if !ok {
		return
	}
	var req grantRequest
	if !opDecode(w, r, &req) {
		return
	}
	if req.Bucket == "" {
		req.Bucket = ledger.BucketSignup
	}
	if req.Bucket != ledger.BucketSignup && req.Bucket != ledger.BucketMonthly {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "bucket must be signup (never expires) or monthly (lapses at the month's end)")
		return
	}
	if req.Credits <= 0 || len(req.ID) > 128 {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "credits must be positive (\"10.000\"); id at most 128 bytes")
		return
	}
	id := req.ID
	if id == "" {
		id = randHex(10)
	}
	res, err := rt.opSubmit(r.Context(), &ledger.Command{ID: "operator/grant/" + a.ID + "/" + id, Type: ledger.CmdGrant,
		Grant: &ledger.Grant{Account: a.ID, Bucket: req.Bucket, Amount: req.Credits.MC()}})
	if err != nil {
		rt.opLedgerError(w, "grant", err)
		return
	}
	if res.Error != "" {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, res.Message)
		return
	}
	if !res.Duplicate {
		rt.cfg.Logger.Info("operator: credit granted", "account", a.ID, "bucket", req.Bucket, "credits", req.Credits.String(), "grant", id)
	}
	bal, err := rt.node.State().AccountBalance(a, rt.cfg.Now())
	if err != nil {
		rt.opInternal(w, "balance", err)
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"account": a.ID, "granted": req.Credits, "repeat": res.Duplicate,
		"balance": billing.Amount(bal.Total)})
}
