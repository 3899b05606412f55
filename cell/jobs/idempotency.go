package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/store"
)

// MaxIdempotencyKey is the longest idempotency key a submission takes.
const MaxIdempotencyKey = 100

// ErrKeyReused is a submission whose idempotency key the account already
// used for a job of other URLs or options.
var ErrKeyReused = errors.New("jobs: this idempotency key was used for another job")

// ValidKey reports whether k is an idempotency key: 1 to 100 printable
// ASCII characters without spaces (as the top-up's Idempotency-Key).
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return false
		}
	}
	return true
}

// HoldKeyed is Hold with an idempotency key: the first submission of
// account with key holds a new job; a repeat of it (the same key, URLs and
// options) while that job is kept returns the same job, with existed set
// and no token — there is nothing to charge or release again. The same key
// with other URLs or options is ErrKeyReused. A job that was dropped (its
// charge refused) or has expired no longer holds its key.
func (m *Manager) HoldKeyed(account, key string, urls []string, opts scrape.Options) (id, token string, existed bool, err error) {
	if account == "" || !ValidKey(key) {
		return "", "", false, scrape.BadInput("Idempotency-Key must be 1 to 100 printable ASCII characters without spaces")
	}
	fp := fingerprint(urls, opts)
	k := append([]byte(store.PrefixJobKey+account+"\x00"), key...)
	m.keyMu.Lock()
	defer m.keyMu.Unlock()
	if v, err := m.st.Get(k); err == nil {
		prev, prevFP, _ := bytes.Cut(v, []byte{0})
		if j, err := m.get(string(prev), account); err == nil && m.alive(j) {
			if !bytes.Equal(prevFP, fp) {
				return "", "", false, ErrKeyReused
			}
			return string(prev), "", true, nil
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", "", false, err
	}
	id, token, err = m.submitKeyed(account, urls, opts, true, k, fp, Extra{Placed: true})
	return id, token, false, err
}

// alive reports whether j still stands for its submission: not a held job
// whose hold has expired or was dropped.
func (m *Manager) alive(j *job) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return !j.gone && !(j.meta.Hold != "" && m.cfg.Now().After(j.meta.HeldUntil))
}

// forgetKey deletes an idempotency key that still names job id.
func (m *Manager) forgetKey(k []byte, id string) {
	m.keyMu.Lock()
	defer m.keyMu.Unlock()
	if v, err := m.st.Get(k); err == nil {
		if prev, _, _ := bytes.Cut(v, []byte{0}); string(prev) == id {
			_ = m.st.Delete(k, store.NoSync)
		}
	}
}

// fingerprint is what a repeat must match: the URLs and the options.
func fingerprint(urls []string, opts scrape.Options) []byte {
	h := sha256.New()
	json.NewEncoder(h).Encode(struct {
		URLs []string       `json:"urls"`
		Opts scrape.Options `json:"opts"`
	}{urls, opts})
	return []byte(hex.EncodeToString(h.Sum(nil)))
}
