package monstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/store"
)

// Path is where the gate serves the store to its cells (a Gate row of
// internal/routes: public, since the caller is a cell, which signs).
const Path = "/monitor-store/"

// MaxBody bounds a request or an answer (a batch holds at most a few
// versions of a page).
const MaxBody = 64 << 20

// scanPage is how many keys one scan call returns.
const scanPage = 512

// Calls are signed both ways with the region's keys (regionauth.Call).

// Server serves a Local store to the region's cells.
type Server struct {
	l   *Local
	v   *regionauth.Verifier
	log *slog.Logger
}

// NewServer serves l to requests signed with the keys v checks.
func NewServer(l *Local, v *regionauth.Verifier, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{l: l, v: v, log: log}
}

type getReq struct {
	Key []byte `json:"key"`
}
type getResp struct {
	Value []byte `json:"value"`
	Found bool   `json:"found"`
}
type scanReq struct {
	Prefix []byte `json:"prefix"`
	Start  []byte `json:"start,omitempty"`
}
type kv struct {
	K []byte `json:"k"`
	V []byte `json:"v"`
}
type scanResp struct {
	KVs  []kv `json:"kvs"`
	More bool `json:"more"`
}
type errResp struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// ServeHTTP answers POST /monitor-store/{get,scan,apply,claim}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	claims, body, err := s.v.ReadCall(r, MaxBody)
	if err != nil {
		s.log.Warn("monitor store: refused a request not signed by a member of the region", "path", r.URL.Path, "err", err)
		httpjson.Error(w, http.StatusForbidden, "forbidden", "only the region's cells use the monitor store")
		return
	}
	ctx := r.Context()
	status, out := http.StatusOK, any(nil)
	switch strings.TrimPrefix(r.URL.Path, Path) {
	case "get":
		var q getReq
		if err = json.Unmarshal(body, &q); err == nil && !allowed(q.Key) {
			err = errOutside
		} else if err == nil {
			var v []byte
			v, err = s.l.Get(ctx, q.Key)
			if errors.Is(err, ErrNotFound) {
				out, err = getResp{}, nil
			} else {
				out = getResp{Value: v, Found: true}
			}
		}
	case "scan":
		var q scanReq
		if err = json.Unmarshal(body, &q); err == nil && !allowed(q.Prefix) {
			err = errOutside
		} else if err == nil {
			resp := scanResp{KVs: []kv{}}
			size := 0
			err = s.l.Scan(ctx, q.Prefix, q.Start, func(k, v []byte) (bool, error) {
				if len(resp.KVs) == scanPage || size > 8<<20 {
					resp.More = true
					return false, nil
				}
				resp.KVs = append(resp.KVs, kv{K: append([]byte{}, k...), V: append([]byte{}, v...)})
				size += len(k) + len(v)
				return true, nil
			})
			out = resp
		}
	case "apply":
		var b Batch
		if err = json.Unmarshal(body, &b); err == nil && !b.inside() {
			err = errOutside
		} else if err == nil {
			err = s.l.Apply(ctx, &b)
			out = map[string]bool{"ok": true}
		}
	case "claim":
		var q ClaimRequest
		if err = json.Unmarshal(body, &q); err == nil {
			var c []Claimed
			c, err = s.l.Claim(ctx, q)
			if c == nil {
				c = []Claimed{}
			}
			out = map[string]any{"claimed": c}
		}
	default:
		status, out = http.StatusNotFound, nil
		err = errors.New("no such route")
	}
	var le *LimitError
	var se *json.SyntaxError
	switch {
	case err == nil:
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
		out = errBody("conflict", err.Error())
	case errors.As(err, &le):
		status = http.StatusTooManyRequests
		out = errBody("monitor_limit", le.Message)
	case errors.Is(err, ErrUnavailable):
		status = http.StatusServiceUnavailable
		s.log.Warn("monitor store", "path", r.URL.Path, "err", err)
		out = errBody("unavailable", err.Error())
	case errors.As(err, &se):
		status = http.StatusBadRequest
		out = errBody("bad_input", "body is not valid JSON")
	case errors.Is(err, errOutside):
		status = http.StatusForbidden
		out = errBody("forbidden", err.Error())
	case status == http.StatusNotFound:
		out = errBody("not_found", err.Error())
	default:
		status = http.StatusInternalServerError
		s.log.Error("monitor store", "path", r.URL.Path, "err", err)
		out = errBody("internal", err.Error())
	}
	s.v.Keys().WriteAnswer(w, claims, status, out)
}

// errOutside: a key outside the monitors' ranges. The gate's store also
// holds its credit journal and usage lines; the monitor store serves and
// writes only store.PrefixMonitor and store.PrefixMonitorHook.
var errOutside = errors.New("monstore: key outside the monitor store")

func allowed(key []byte) bool {
	return len(key) > 0 && (strings.HasPrefix(string(key), store.PrefixMonitor) || strings.HasPrefix(string(key), HookPrefix))
}

// inside reports whether every key b reads or writes is a monitor key (a
// range ends at most at the end of one).
func (b *Batch) inside() bool {
	for _, c := range b.Conds {
		if !allowed(c.Key) {
			return false
		}
	}
	for _, o := range b.Ops {
		if !allowed(o.Key) || o.Op == "delrange" && !allowed(o.End) && string(o.End) != string(store.PrefixEnd([]byte(store.PrefixMonitor))) {
			return false
		}
	}
	return true
}

func errBody(code, msg string) errResp {
	var e errResp
	e.Error.Code, e.Error.Message = code, msg
	return e
}

// ErrNoGate is a call while no gate of the region is known or answers.
var ErrNoGate = regionauth.ErrNoGate

// Client is the store at the region's gate, for a cell.
type Client struct {
	regionauth.Gate
}

// storeHTTP is the store's client unless the Gate names one: calls are
// small, a 30 s timeout.
var storeHTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}

func (c *Client) call(ctx context.Context, op string, in, out any) error {
	g := c.Gate
	if g.HTTP == nil {
		g.HTTP = storeHTTP
	}
	status, raw, err := g.Call(ctx, Path+op, in, MaxBody)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		var e errResp
		json.Unmarshal(raw, &e)
		switch status {
		case http.StatusConflict:
			return ErrConflict
		case http.StatusTooManyRequests:
			return &LimitError{Message: e.Error.Message}
		case http.StatusServiceUnavailable:
			return fmt.Errorf("%w: %w", ErrNoGate, ErrUnavailable)
		}
		return fmt.Errorf("monstore: the gate answered HTTP %d: %s", status, e.Error.Message)
	}
	return json.Unmarshal(raw, out)
}

// Get implements Store.
func (c *Client) Get(ctx context.Context, key []byte) ([]byte, error) {
	var r getResp
	if err := c.call(ctx, "get", getReq{Key: key}, &r); err != nil {
		return nil, err
	}
	if !r.Found {
		return nil, ErrNotFound
	}
	return r.Value, nil
}

// Scan implements Store, a page of keys per call.
func (c *Client) Scan(ctx context.Context, prefix, start []byte, fn func(k, v []byte) (bool, error)) error {
	for {
		var r scanResp
		if err := c.call(ctx, "scan", scanReq{Prefix: prefix, Start: start}, &r); err != nil {
			return err
		}
		for _, e := range r.KVs {
			if more, err := fn(e.K, e.V); err != nil || !more {
				return err
			}
		}
		if !r.More || len(r.KVs) == 0 {
			return nil
		}
		start = append(r.KVs[len(r.KVs)-1].K, 0)
	}
}

// Apply implements Store.
func (c *Client) Apply(ctx context.Context, b *Batch) error {
	var r map[string]bool
	return c.call(ctx, "apply", b, &r)
}

// Claim implements Store.
func (c *Client) Claim(ctx context.Context, req ClaimRequest) ([]Claimed, error) {
	var r struct {
		Claimed []Claimed `json:"claimed"`
	}
	err := c.call(ctx, "claim", req, &r)
	return r.Claimed, err
}
