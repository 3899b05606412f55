// Package issues keeps the problems customers report to the operators (the
// tool server's report_issue tool, or POST /v1/issues): each report is
// stored in the region's gate store under a reference the caller gets back,
// and the operators list them with GET /operator/v1/issues (an operator
// key, never a customer key) or `trawl issues`.
package issues

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/store"
)

// Limits of a report.
const (
	MaxTitle = 200
	MaxText  = 8000
	// MaxList is the most reports one listing returns.
	MaxList = 500
)

// Report is one stored report.
type Report struct {
	Reference    string    `json:"reference"`
	Account      string    `json:"account"`
	Region       string    `json:"region"`
	Title        string    `json:"title"`
	WhatHappened string    `json:"what_happened"`
	Via          string    `json:"via"` // mcp or http
	CreatedAt    time.Time `json:"created_at"`
}

// Config is what the handler needs.
type Config struct {
	// Store is the region's gate store (the range store.PrefixIssues).
	Store  *store.Store
	Region string
	// Account returns the caller's account id ("" for none).
	Account func(*http.Request) string
	Now     func() time.Time
}

// HeaderVia marks a report sent by the tool server (value "mcp").
const HeaderVia = "Trawl-Via"

type request struct {
	Title        string `json:"title"`
	WhatHappened string `json:"what_happened"`
}

// Handlers are the reports' handlers by their row of the route table
// (internal/routes, service issues): POST /v1/issues, and GET
// /operator/v1/issues, whose row needs an operator key (the role trawl_auth
// and the gate check from the row).
func Handlers(cfg Config) routes.Handlers {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return routes.Handlers{
		"POST /v1/issues":         http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { report(cfg, w, r) }),
		"GET /operator/v1/issues": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { list(cfg, w, r) }),
	}
}

func report(cfg Config, w http.ResponseWriter, r *http.Request) {
	account := cfg.Account(r)
	if account == "" {
		httpjson.Error(w, http.StatusUnauthorized, "unauthorized", "send your API key as Authorization: Bearer <key> or x-api-key: <key>")
		return
	}
	var req request
	if err := httpjson.Decode(w, r, routes.Limit(r), &req); err != nil {
		var de *httpjson.DecodeError
		if errors.As(err, &de) {
			httpjson.Error(w, de.Status(), de.Code(), de.Error())
			return
		}
		httpjson.Error(w, http.StatusBadRequest, "bad_input", err.Error())
		return
	}
	req.Title, req.WhatHappened = strings.TrimSpace(req.Title), strings.TrimSpace(req.WhatHappened)
	switch {
	case req.Title == "" || req.WhatHappened == "":
		httpjson.Error(w, http.StatusBadRequest, "bad_input", "title and what_happened are required")
		return
	case utf8.RuneCountInString(req.Title) > MaxTitle:
		httpjson.Error(w, http.StatusBadRequest, "bad_input", "title is longer than "+strconv.Itoa(MaxTitle)+" characters")
		return
	case utf8.RuneCountInString(req.WhatHappened) > MaxText:
		httpjson.Error(w, http.StatusBadRequest, "bad_input", "what_happened is longer than "+strconv.Itoa(MaxText)+" characters")
		return
	}
	now := cfg.Now().UTC()
	var b [8]byte
	rand.Read(b[:])
	rep := Report{
		Reference: "iss_" + cfg.Region + "_" + hex.EncodeToString(b[:]),
		Account:   account, Region: cfg.Region, Title: req.Title, WhatHappened: req.WhatHappened,
		Via: "http", CreatedAt: now,
	}
	if r.Header.Get(HeaderVia) == "mcp" {
		rep.Via = "mcp"
	}
	v, _ := json.Marshal(rep)
	if err := cfg.Store.Set(key(now, rep.Reference), v, store.Sync); err != nil {
		httpjson.Error(w, http.StatusServiceUnavailable, "unavailable", "the report could not be stored; send it again")
		return
	}
	httpjson.Write(w, http.StatusCreated, map[string]any{
		"reference": rep.Reference, "status": "received", "created_at": now,
		"message": "Thank you: the operators read every report. Quote " + rep.Reference + " if you write to them about it.",
	})
}

// key orders reports newest first: the inverted time, then the reference.
func key(t time.Time, ref string) []byte {
	k := make([]byte, 0, len(store.PrefixIssues)+8+len(ref))
	k = append(k, store.PrefixIssues...)
	k = binary.BigEndian.AppendUint64(k, math.MaxUint64-uint64(t.UnixNano()))
	return append(k, ref...)
}

func list(cfg Config, w http.ResponseWriter, r *http.Request) {
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxList {
			httpjson.Error(w, http.StatusBadRequest, "bad_input", "limit must be 1 to "+strconv.Itoa(MaxList))
			return
		}
		limit = n
	}
	out := []Report{}
	err := cfg.Store.Scan([]byte(store.PrefixIssues), nil, func(_, v []byte) (bool, error) {
		var rep Report
		if err := json.Unmarshal(v, &rep); err != nil {
			return false, err
		}
		out = append(out, rep)
		return len(out) < limit, nil
	})
	if err != nil {
		httpjson.Error(w, http.StatusInternalServerError, "internal", "the reports could not be read")
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"region": cfg.Region, "issues": out})
}
