package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// Entry is one transfer in the journal: Amount moves from Debit to Credit.
// Entries are immutable; each carries the hash of the one before it, so
// changing any entry breaks every hash after it.
type Entry struct {
	Index    uint64    `json:"index"`
	ID       string    `json:"id"`     // command id + "/" + position in the command
	Debit    string    `json:"debit"`  // the account the amount leaves
	Credit   string    `json:"credit"` // the account the amount enters
	Amount   MC        `json:"amount_mc"`
	Kind     string    `json:"kind"`    // grant, topup, hold, charge, release, expire
	Receipt  string    `json:"receipt"` // receipt id for charges; payment id for top-ups
	Time     time.Time `json:"time"`
	PrevHash string    `json:"prev_hash"`
	Hash     string    `json:"hash"`
}

// Entry kinds.
const (
	KindGrant   = "grant"
	KindTopup   = "topup"
	KindHold    = "hold"
	KindCharge  = "charge"
	KindRelease = "release"
	KindExpire  = "expire"
)

// ComputeHash returns the entry's hash: SHA-256 over a canonical,
// length-prefixed encoding of every field but Hash, PrevHash included.
func (e *Entry) ComputeHash() string {
	h := sha256.New()
	var n [8]byte
	put := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	binary.BigEndian.PutUint64(n[:], e.Index)
	h.Write(n[:])
	put(e.ID)
	put(e.Debit)
	put(e.Credit)
	binary.BigEndian.PutUint64(n[:], uint64(e.Amount))
	h.Write(n[:])
	put(e.Kind)
	put(e.Receipt)
	binary.BigEndian.PutUint64(n[:], uint64(e.Time.UnixNano()))
	h.Write(n[:])
	put(e.PrevHash)
	return hex.EncodeToString(h.Sum(nil))
}

// GenesisHash is the PrevHash of the first entry.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"
