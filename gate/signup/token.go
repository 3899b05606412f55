package signup

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Errors of ParseToken.
var (
	ErrTokenInvalid = errors.New("verification token not valid")
	ErrTokenExpired = errors.New("verification token expired")
)

// Token is what a verification link names: the account to verify and the
// address the mail went to, until Expires.
type Token struct {
	Account string
	Email   string
	Expires time.Time
}

// tokenBody is the signed payload; the short names keep the link short.
type tokenBody struct {
	Account string `json:"a"`
	Email   string `json:"e"`
	Expires int64  `json:"x"` // unix seconds
}

// tokenDomain separates these MACs from anything else the secret may key.
const tokenDomain = "trawl signup verify v1\x00"

// maxTokenLen bounds what is decoded; a real token is about 200 bytes.
const maxTokenLen = 2048

var b64 = base64.RawURLEncoding

// SignToken returns tok as base64url(JSON payload) + "." +
// base64url(HMAC-SHA256(secret, domain + payload part)).
func SignToken(secret []byte, tok Token) string {
	body, _ := json.Marshal(tokenBody{Account: tok.Account, Email: tok.Email, Expires: tok.Expires.Unix()})
	p := b64.EncodeToString(body)
	return p + "." + b64.EncodeToString(tokenMAC(secret, p))
}

func tokenMAC(secret []byte, payload string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(tokenDomain))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// ParseToken checks s's signature (in constant time) and then its expiry:
// ErrTokenInvalid for anything malformed, tampered with or signed with
// another secret; ErrTokenExpired, with the token, once now reaches Expires.
func ParseToken(secret []byte, s string, now time.Time) (Token, error) {
	if len(s) > maxTokenLen {
		return Token{}, ErrTokenInvalid
	}
	p, sig, ok := strings.Cut(s, ".")
	if !ok {
		return Token{}, ErrTokenInvalid
	}
	mac, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, tokenMAC(secret, p)) {
		return Token{}, ErrTokenInvalid
	}
	raw, err := b64.DecodeString(p)
	if err != nil {
		return Token{}, ErrTokenInvalid
	}
	var body tokenBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.More() || body.Account == "" || body.Email == "" || body.Expires <= 0 {
		return Token{}, ErrTokenInvalid
	}
	tok := Token{Account: body.Account, Email: body.Email, Expires: time.Unix(body.Expires, 0).UTC()}
	if !now.Before(tok.Expires) {
		return tok, ErrTokenExpired
	}
	return tok, nil
}
