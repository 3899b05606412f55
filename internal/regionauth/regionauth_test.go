package regionauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func mustKeys(t *testing.T, s string) *Keys {
	t.Helper()
	k, err := ParseKeys(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseKeys(t *testing.T) {
	a, b := NewKey(), NewKey()
	k := mustKeys(t, a+", "+b)
	if len(k.All()) != 2 {
		t.Fatalf("got %d keys, want 2", len(k.All()))
	}
	for _, bad := range []string{"", " , ", "abcd", a + ",zz", strings.Repeat("ab", 16)} {
		if _, err := ParseKeys(bad); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
}

func TestSignVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	k := mustKeys(t, NewKey())
	v := NewVerifier(k, clock)

	r := httptest.NewRequest("POST", "/scrape/jobs/j_eu.c1.00/retry?x=1", nil)
	nonce := k.Sign(r, Claims{Account: "acct_1"}, now)
	c, err := v.Verify(r)
	if err != nil || c.Account != "acct_1" || c.Nonce != nonce || c.Private {
		t.Fatalf("Verify = %+v, %v", c, err)
	}
	// The same request again is a replay.
	if _, err := v.Verify(r); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: %v, want ErrReplay", err)
	}

	// Each forgery starts from a request signed for acct_1 and changes
	// one thing after signing.
	signed := func(k *Keys) *http.Request {
		r := httptest.NewRequest("POST", "/scrape/jobs/j_eu.c1.00/retry?x=1", nil)
		k.Sign(r, Claims{Account: "acct_1"}, now)
		return r
	}
	cases := map[string]func(r *http.Request){
		"unsigned":        func(r *http.Request) { r.Header.Del(HeaderAuth) },
		"other account":   func(r *http.Request) { r.Header.Set(HeaderAccount, "acct_2") },
		"account removed": func(r *http.Request) { r.Header.Del(HeaderAccount) },
		"other path":      func(r *http.Request) { r.URL.Path = "/scrape/jobs" },
		"other query":     func(r *http.Request) { r.URL.RawQuery = "x=2" },
		"other method":    func(r *http.Request) { r.Method = "GET" },
		"garbage":         func(r *http.Request) { r.Header.Set(HeaderAuth, "v1;t=x;n=y;s=z") },
		"private added": func(r *http.Request) {
			r.Header.Set(HeaderAuth, strings.Replace(r.Header.Get(HeaderAuth), ";p=0;", ";p=1;", 1))
		},
		"other version": func(r *http.Request) { r.Header.Set(HeaderAuth, "v2"+r.Header.Get(HeaderAuth)[2:]) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			r := signed(k)
			mutate(r)
			if _, err := v.Verify(r); err == nil {
				t.Fatal("verified")
			}
		})
	}
	t.Run("other region's key", func(t *testing.T) {
		if _, err := v.Verify(signed(mustKeys(t, NewKey()))); !errors.Is(err, ErrBadSig) {
			t.Fatalf("got %v, want ErrBadSig", err)
		}
	})
}

func TestWindowAndRotation(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	old, next := NewKey(), NewKey()
	signer := mustKeys(t, old)
	// A cell mid-rotation accepts both keys.
	v := NewVerifier(mustKeys(t, next+","+old), func() time.Time { return now })
	r := httptest.NewRequest("GET", "/health", nil)
	signer.Sign(r, Claims{}, now.Add(-Window-time.Second))
	if _, err := v.Verify(r); !errors.Is(err, ErrStale) {
		t.Fatalf("stale: %v", err)
	}
	r = httptest.NewRequest("GET", "/health", nil)
	signer.Sign(r, Claims{}, now.Add(Window-time.Second))
	if _, err := v.Verify(r); err != nil {
		t.Fatalf("old key mid-rotation: %v", err)
	}
	// Nonces are remembered across one rotation of the generations.
	r2 := r.Clone(r.Context())
	now = now.Add(Window)
	if _, err := v.Verify(r2); err == nil {
		t.Fatal("replay after one generation verified")
	}
}

func TestAnswer(t *testing.T) {
	k := mustKeys(t, NewKey())
	sig := k.SignAnswer("n1", 200, `{"kind":"scrape"}`)
	if !k.VerifyAnswer("n1", 200, `{"kind":"scrape"}`, sig) {
		t.Fatal("answer does not verify")
	}
	for _, c := range []struct {
		nonce  string
		status int
		usage  string
	}{{"n2", 200, `{"kind":"scrape"}`}, {"n1", 201, `{"kind":"scrape"}`}, {"n1", 200, `{"kind":"scrape","count":10}`}} {
		if k.VerifyAnswer(c.nonce, c.status, c.usage, sig) {
			t.Errorf("forged answer %+v verified", c)
		}
	}
	if mustKeys(t, NewKey()).VerifyAnswer("n1", 200, `{"kind":"scrape"}`, sig) {
		t.Error("another region's key verified the answer")
	}
}
