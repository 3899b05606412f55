package gate

import (
	"encoding/json"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// A held job or retry is charged by the meter and then released at its
// cell (caddy-modules/meter). Between the two the gate keeps a record of
// the release it owes, synced, so a gate that crashes or restarts after
// the charge still starts what the customer paid for: the meter resumes
// every record it finds (PendingReleases) when it starts.
//
//	R/<job id> 0x00 <hold token>    PendingRelease, JSON

// PendingRelease is a charged hold whose release the cell has not
// confirmed.
type PendingRelease struct {
	Account string    `json:"account"`
	Job     string    `json:"job"`
	Token   string    `json:"token"`
	At      time.Time `json:"at"` // when it was charged
	// Credits is what the hold was charged ("3.000"; empty in records of
	// an older gate).
	Credits string `json:"credits,omitempty"`
}

func keyRelease(job, token string) []byte {
	return []byte(store.PrefixReleases + job + "\x00" + token)
}

// OweRelease records that p is charged and must be released.
func (rt *Runtime) OweRelease(p PendingRelease) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return rt.st.Set(keyRelease(p.Job, p.Token), b, store.Sync)
}

// Released forgets a release the cell confirmed (or that can no longer
// be made).
func (rt *Runtime) Released(job, token string) error {
	return rt.st.Delete(keyRelease(job, token), store.NoSync)
}

// PendingReleases lists the releases owed, oldest record key first.
func (rt *Runtime) PendingReleases() ([]PendingRelease, error) {
	var out []PendingRelease
	err := rt.st.Scan([]byte(store.PrefixReleases), nil, func(_, v []byte) (bool, error) {
		var p PendingRelease
		if err := json.Unmarshal(v, &p); err != nil {
			return false, err
		}
		out = append(out, p)
		return true, nil
	})
	return out, err
}
