// Package regionauth is the trust between the members of a region: the
// region's keys, the signature a gate puts on every request it sends to a
// cell, and the signature a cell puts on the usage it reports back.
//
// A region shares a keyring (TRAWL_REGION_KEYS): one or more 32-byte keys,
// the first of which signs; every key verifies. The same keys encrypt and
// authenticate the region's memberlist gossip, so a process without them
// can neither join the region nor send a cell work. Rotation is adding a
// key everywhere (second position), then making it first everywhere, then
// removing the old one (docs/security.md).
//
// A gate→cell request carries Trawl-Account (the caller's account id; a
// customer's API key never leaves the gate) and Trawl-Auth, an HMAC over
// the method, the request URI, the account, a time and a nonce. The cell
// refuses a request whose signature does not verify, whose time is more
// than Window away from its clock, or whose nonce it has already seen
// within that window. The cell's usage header is answered with
// Trawl-Usage-Sig, an HMAC over the request's nonce, the status and the
// usage, so the gate bills only what a cell of its region reported for
// that very request.
package regionauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvKeys is the environment variable that holds a region's keyring:
// comma-separated keys, each 64 hex digits or standard base64 of 32 bytes.
const EnvKeys = "TRAWL_REGION_KEYS"

// Headers of a signed request and a signed answer.
const (
	HeaderAuth     = "Trawl-Auth"
	HeaderAccount  = "Trawl-Account"
	HeaderUsageSig = "Trawl-Usage-Sig"
)

// KeySize is the size of every key in bytes (AES-256 for memberlist,
// HMAC-SHA256 for requests).
const KeySize = 32

// Window is how far a request's time may be from the verifier's clock.
const Window = 30 * time.Second

// Errors of Verify.
var (
	ErrMissing   = errors.New("regionauth: request is not signed")
	ErrMalformed = errors.New("regionauth: malformed signature")
	ErrStale     = errors.New("regionauth: signature time is outside the window")
	ErrBadSig    = errors.New("regionauth: signature does not verify")
	ErrReplay    = errors.New("regionauth: nonce already used")
)

// Keys is a region's keyring. The zero value has no key.
type Keys struct {
	keys [][]byte
}

// ParseKeys reads a keyring as EnvKeys holds it.
func ParseKeys(s string) (*Keys, error) {
	var k Keys
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		b, err := hex.DecodeString(f)
		if err != nil {
			if b, err = base64.StdEncoding.DecodeString(f); err != nil {
				return nil, fmt.Errorf("regionauth: key %d: neither hex nor base64", i+1)
			}
		}
		if len(b) != KeySize {
			return nil, fmt.Errorf("regionauth: key %d has %d bytes: want %d (64 hex digits)", i+1, len(b), KeySize)
		}
		k.keys = append(k.keys, b)
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("regionauth: no key: set %s to 64 hex digits (openssl rand -hex 32)", EnvKeys)
	}
	return &k, nil
}

// KeysFrom is a keyring of raw keys, the first signing; each must have
// KeySize bytes.
func KeysFrom(raw ...[]byte) (*Keys, error) {
	if len(raw) == 0 {
		return nil, errors.New("regionauth: no key")
	}
	for i, b := range raw {
		if len(b) != KeySize {
			return nil, fmt.Errorf("regionauth: key %d has %d bytes: want %d", i+1, len(b), KeySize)
		}
	}
	return &Keys{keys: raw}, nil
}

// NewKey returns a random key in the form ParseKeys reads.
func NewKey() string {
	var b [KeySize]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// All returns the keys, the primary first. The slices must not be modified.
func (k *Keys) All() [][]byte { return k.keys }

// Primary is the key that signs.
func (k *Keys) Primary() []byte { return k.keys[0] }

func (k *Keys) mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{'\n'})
	}
	return m.Sum(nil)
}

// verify reports whether sig is the MAC of parts under any key.
func (k *Keys) verify(sig []byte, parts ...string) bool {
	ok := false
	for _, key := range k.keys {
		// Every key is tried, so the time does not tell which one matched.
		if hmac.Equal(sig, k.mac(key, parts...)) {
			ok = true
		}
	}
	return ok
}

// Claims is what a gate says of a request it sends.
type Claims struct {
	// Account is the caller's account id; "" for a call with none.
	Account string
	// Private says the region's gate lets its cells fetch private and
	// loopback addresses (development and tests). A cell configured to
	// allow them refuses requests that do not say so.
	Private bool
	// Nonce is unique to the request; the cell's answer is signed over it.
	Nonce string
}

// Sign signs r for a cell of the region with c's account and policy at
// time now, and returns the nonce, which the cell's answer is signed over.
func (k *Keys) Sign(r *http.Request, c Claims, now time.Time) string {
	var n [16]byte
	rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	p := "0"
	if c.Private {
		p = "1"
	}
	sig := k.mac(k.Primary(), "trawl-req-v1", r.Method, r.URL.RequestURI(), c.Account, p, ts, nonce)
	if c.Account == "" {
		r.Header.Del(HeaderAccount)
	} else {
		r.Header.Set(HeaderAccount, c.Account)
	}
	r.Header.Set(HeaderAuth, "v1;t="+ts+";n="+nonce+";p="+p+";s="+hex.EncodeToString(sig))
	return nonce
}

// Verifier checks signed requests and remembers their nonces for the
// window, so a captured request cannot be sent again. It is safe for
// concurrent use.
type Verifier struct {
	keys *Keys
	now  func() time.Time

	mu       sync.Mutex
	cur, old map[string]struct{}
	rotated  time.Time
}

// NewVerifier returns a verifier of keys on the clock now (time.Now if
// nil).
func NewVerifier(keys *Keys, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{keys: keys, now: now, cur: map[string]struct{}{}, old: map[string]struct{}{}, rotated: now()}
}

// Keys returns the keyring the verifier checks against.
func (v *Verifier) Keys() *Keys { return v.keys }

// Verify checks r's signature and returns its claims.
func (v *Verifier) Verify(r *http.Request) (Claims, error) {
	h := r.Header.Get(HeaderAuth)
	if h == "" {
		return Claims{}, ErrMissing
	}
	var ts, nonce, sig, p string
	for i, f := range strings.Split(h, ";") {
		if i == 0 {
			if f != "v1" {
				return Claims{}, ErrMalformed
			}
			continue
		}
		key, val, _ := strings.Cut(f, "=")
		switch key {
		case "t":
			ts = val
		case "n":
			nonce = val
		case "s":
			sig = val
		case "p":
			p = val
		}
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	raw, err2 := hex.DecodeString(sig)
	if err != nil || err2 != nil || len(nonce) != 32 || len(raw) != sha256.Size || (p != "0" && p != "1") {
		return Claims{}, ErrMalformed
	}
	account := r.Header.Get(HeaderAccount)
	if !v.keys.verify(raw, "trawl-req-v1", r.Method, r.URL.RequestURI(), account, p, ts, nonce) {
		return Claims{}, ErrBadSig
	}
	now := v.now()
	if d := now.Sub(time.UnixMilli(ms)); d > Window || d < -Window {
		return Claims{}, ErrStale
	}
	if !v.remember(nonce, now) {
		return Claims{}, ErrReplay
	}
	return Claims{Account: account, Private: p == "1", Nonce: nonce}, nil
}

// remember records nonce and reports whether it was new. Nonces live in
// two generations of one window each: a nonce older than two windows
// cannot pass the time check, so forgetting it is safe.
func (v *Verifier) remember(nonce string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if now.Sub(v.rotated) >= Window {
		v.old, v.cur, v.rotated = v.cur, make(map[string]struct{}, len(v.cur)), now
	}
	if _, ok := v.cur[nonce]; ok {
		return false
	}
	if _, ok := v.old[nonce]; ok {
		return false
	}
	v.cur[nonce] = struct{}{}
	return true
}

// SignAnswer is the signature of a cell's usage header for the request
// with nonce, answered with status.
func (k *Keys) SignAnswer(nonce string, status int, usage string) string {
	return hex.EncodeToString(k.mac(k.Primary(), "trawl-ans-v1", nonce, strconv.Itoa(status), usage))
}

// VerifyAnswer reports whether sig signs usage for the request with nonce.
func (k *Keys) VerifyAnswer(nonce string, status int, usage, sig string) bool {
	raw, err := hex.DecodeString(sig)
	if err != nil || len(raw) != sha256.Size {
		return false
	}
	return k.verify(raw, "trawl-ans-v1", nonce, strconv.Itoa(status), usage)
}
