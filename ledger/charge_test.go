package ledger

import (
	"testing"
	"time"
)

func TestChargeEncoding(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 2, 3, 4, time.UTC)
	var ch Charge
	if err := decodeCharge(encodeCharge("acct-é", "r/1", 1234, now), &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Account != "acct-é" || ch.Receipt != "r/1" || ch.Amount != 1234 || !ch.Time.Equal(now) {
		t.Fatalf("%+v", ch)
	}
	for _, bad := range [][]byte{nil, make([]byte, 15), append(make([]byte, 16), 9, 'a')} {
		if err := decodeCharge(bad, &ch); err == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}
