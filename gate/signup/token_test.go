package signup_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate/signup"
)

func TestTokenSignAndParse(t *testing.T) {
	tok := signup.Token{Account: "acct_1", Email: "ann@example.com", Expires: t0.Add(48 * time.Hour)}
	good := signup.SignToken(secret, tok)
	payload, sig, _ := strings.Cut(good, ".")
	flip := func(s string) string { // one character changed, still base64url
		b := []byte(s)
		if b[3] == 'A' {
			b[3] = 'B'
		} else {
			b[3] = 'A'
		}
		return string(b)
	}
	forged := func(body string) string { // a payload of our choosing, old signature
		return base64.RawURLEncoding.EncodeToString([]byte(body)) + "." + sig
	}
	for _, tc := range []struct {
		name   string
		token  string
		secret []byte
		now    time.Time
		want   error
	}{
		{"valid", good, secret, t0, nil},
		{"valid a second before expiry", good, secret, tok.Expires.Add(-time.Second), nil},
		{"expired at the second", good, secret, tok.Expires, signup.ErrTokenExpired},
		{"expired later", good, secret, tok.Expires.Add(time.Hour), signup.ErrTokenExpired},
		{"other secret", good, []byte("another secret of thirty-two bytes!!"), t0, signup.ErrTokenInvalid},
		{"payload tampered", flip(payload) + "." + sig, secret, t0, signup.ErrTokenInvalid},
		{"signature tampered", payload + "." + flip(sig), secret, t0, signup.ErrTokenInvalid},
		{"other account, old signature", forged(`{"a":"acct_2","e":"ann@example.com","x":1795000000}`), secret, t0, signup.ErrTokenInvalid},
		{"signature cut short", payload + "." + sig[:20], secret, t0, signup.ErrTokenInvalid},
		{"no signature", payload, secret, t0, signup.ErrTokenInvalid},
		{"empty", "", secret, t0, signup.ErrTokenInvalid},
		{"not base64", "!!!." + sig, secret, t0, signup.ErrTokenInvalid},
		{"three parts", good + ".x", secret, t0, signup.ErrTokenInvalid},
		{"huge", strings.Repeat("a", 5000) + "." + sig, secret, t0, signup.ErrTokenInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := signup.ParseToken(tc.secret, tc.token, tc.now)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("ParseToken err = %v, want %v", err, tc.want)
			}
			if err == nil && (got.Account != tok.Account || got.Email != tok.Email || !got.Expires.Equal(tok.Expires)) {
				t.Fatalf("ParseToken = %+v, want %+v", got, tok)
			}
		})
	}
}

// A validly signed payload must still name an account, an address and an
// expiry.
func TestTokenNeedsEveryField(t *testing.T) {
	for _, tok := range []signup.Token{
		{Email: "ann@example.com", Expires: t0.Add(time.Hour)},
		{Account: "acct_1", Expires: t0.Add(time.Hour)},
		{Account: "acct_1", Email: "ann@example.com", Expires: time.Unix(0, 0)},
	} {
		if _, err := signup.ParseToken(secret, signup.SignToken(secret, tok), t0); !errors.Is(err, signup.ErrTokenInvalid) {
			t.Errorf("ParseToken(%+v) err = %v, want ErrTokenInvalid", tok, err)
		}
	}
}

// The token is URL-safe as it is: the link needs no escaping.
func TestTokenIsURLSafe(t *testing.T) {
	s := signup.SignToken(secret, signup.Token{Account: "acct_ü/+?", Email: "a+b@example.com", Expires: t0})
	if strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) {
		t.Fatalf("token %q has characters a URL would escape", s)
	}
}
