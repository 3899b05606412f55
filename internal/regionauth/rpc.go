package regionauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Signed JSON calls between the members of a region (a cell asking its
// gate: the monitor store, the operator's recipes). The request is signed
// over its method and URI, which carries the body's SHA-256 (?h=), so the
// body is covered too; the answer is signed over the request's nonce, its
// status and its body's hash, so a cell never takes an answer from
// anything but a member of its region.

// ErrUnsigned is an answer not signed with the region's keys.
var ErrUnsigned = errors.New("regionauth: the answer is not signed with the region's keys")

// ErrBodyNotSigned is a request whose body is not the one its signature
// covers.
var ErrBodyNotSigned = errors.New("regionauth: the body is not the one signed")

// Call posts in, as JSON, to url (no query) signed with k, and returns the
// answer's status and body once its signature checks out. A transport
// error or an unsigned answer is an error; any signed status is not.
func (k *Keys) Call(ctx context.Context, hc *http.Client, url string, in any, now time.Time, maxAnswer int64) (int, []byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, nil, err
	}
	sum := sha256.Sum256(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"?h="+hex.EncodeToString(sum[:]), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	nonce := k.Sign(req, Claims{}, now)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return 0, nil, err
	}
	if int64(len(raw)) > maxAnswer {
		return 0, nil, fmt.Errorf("regionauth: an answer over %d bytes", maxAnswer)
	}
	rs := sha256.Sum256(raw)
	if !k.VerifyAnswer(nonce, resp.StatusCode, hex.EncodeToString(rs[:]), resp.Header.Get(HeaderUsageSig)) {
		return resp.StatusCode, nil, fmt.Errorf("%w (HTTP %d)", ErrUnsigned, resp.StatusCode)
	}
	return resp.StatusCode, raw, nil
}

// ReadCall checks a request made with Call: signed by a member of the
// region (no account: a member's own call), POST, its body at most max
// bytes and the one signed. It returns the claims (their nonce signs the
// answer: WriteAnswer) and the body.
func (v *Verifier) ReadCall(r *http.Request, max int64) (Claims, []byte, error) {
	claims, err := v.Verify(r)
	if err != nil {
		return Claims{}, nil, err
	}
	if claims.Account != "" {
		return Claims{}, nil, errors.New("regionauth: a call on a customer's behalf")
	}
	if r.Method != http.MethodPost {
		return Claims{}, nil, errors.New("regionauth: a call is a POST")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return Claims{}, nil, err
	}
	if int64(len(body)) > max {
		return claims, nil, fmt.Errorf("regionauth: a body over %d bytes", max)
	}
	if sum := sha256.Sum256(body); r.URL.Query().Get("h") != hex.EncodeToString(sum[:]) {
		return Claims{}, nil, ErrBodyNotSigned
	}
	return claims, body, nil
}

// WriteAnswer writes out as the JSON answer to a call whose claims are c,
// signed so the caller's Call accepts it.
func (k *Keys) WriteAnswer(w http.ResponseWriter, c Claims, status int, out any) {
	raw, _ := json.Marshal(out)
	sum := sha256.Sum256(raw)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(HeaderUsageSig, k.SignAnswer(c.Nonce, status, hex.EncodeToString(sum[:])))
	w.WriteHeader(status)
	w.Write(raw)
}

// ErrNoGate is a call while no gate of the region is known, or one its
// gate did not answer, or not with the region's signature.
var ErrNoGate = errors.New("the region's gate is not reachable")

// Gate is a member's (a cell's) way to its region's gate: the monitor
// store and the operator recipes are calls through it.
type Gate struct {
	// Keys are the region's keys.
	Keys *Keys
	// Addr returns the gate's host:port ("" while none is known).
	Addr func() string
	// HTTP is the client (default: one with a 60 s timeout).
	HTTP *http.Client
	// Now is the clock of signatures (default real time: the gate checks
	// it against its own).
	Now func() time.Time
}

var defaultGateHTTP = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}

// Call posts in to path on the gate (Keys.Call) and returns the signed
// answer's status and body; ErrNoGate (wrapping the cause) when there is
// no signed answer.
func (g *Gate) Call(ctx context.Context, path string, in any, maxAnswer int64) (int, []byte, error) {
	addr := g.Addr()
	if addr == "" {
		return 0, nil, ErrNoGate
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	hc := g.HTTP
	if hc == nil {
		hc = defaultGateHTTP
	}
	status, raw, err := g.Keys.Call(ctx, hc, "http://"+addr+path, in, now(), maxAnswer)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrNoGate, err)
	}
	return status, raw, nil
}

// Answer is a cell's answer to a gate's signed request (Keys.Do).
type Answer struct {
	// Status is the cell's HTTP status.
	Status int
	// Usage is the cell's usage report (the Trawl-Usage header,
	// internal/metering), which the answer's signature covers.
	Usage string
	// Body is the answer's body, at most the caller's bound.
	Body []byte
}

// ErrTooLong is an answer over the caller's bound.
var ErrTooLong = errors.New("regionauth: the answer is over its bound")

// Do sends req, signed with k for c at now, through hc, and returns the
// answer once its signature (over the request's nonce, the status and the
// usage report) checks out: the one way a gate calls a cell of its region
// (search, the model, recipe health, monitor charges, hold releases). The
// body is read up to maxAnswer bytes; a longer one is ErrTooLong. A
// transport error or an unsigned answer is an error, any signed status is
// not (the caller decides what a status means).
func (k *Keys) Do(hc *http.Client, req *http.Request, c Claims, now time.Time, maxAnswer int64) (*Answer, error) {
	nonce := k.Sign(req, c, now)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	a := &Answer{Status: resp.StatusCode, Usage: resp.Header.Get(headerUsage)}
	if !k.VerifyAnswer(nonce, resp.StatusCode, a.Usage, resp.Header.Get(HeaderUsageSig)) {
		return nil, fmt.Errorf("%w (HTTP %d from %s)", ErrUnsigned, resp.StatusCode, req.URL.Host)
	}
	if a.Body, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1)); err != nil {
		return nil, err
	}
	if int64(len(a.Body)) > maxAnswer {
		return nil, fmt.Errorf("%w: %d bytes from %s", ErrTooLong, maxAnswer, req.URL.Host)
	}
	return a, nil
}

// OK is nil for a 200 answer, else an error naming the status and the
// start of the body.
func (a *Answer) OK() error {
	if a.Status == http.StatusOK {
		return nil
	}
	b := a.Body
	if len(b) > 512 {
		b = b[:512]
	}
	return fmt.Errorf("HTTP %d %s", a.Status, bytes.TrimSpace(b))
}

// headerUsage is internal/metering's Header (regionauth imports nothing of
// the project).
const headerUsage = "Trawl-Usage"
