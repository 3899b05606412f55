package regionauth

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpen(t *testing.T) {
	old, _ := ParseKeys(NewKey())
	next, _ := ParseKeys(NewKey())
	rotated, _ := KeysFrom(next.Primary(), old.Primary())
	secret := []byte(`{"session":"sid=abc123"}`)
	sealed, err := old.Seal("recipe run", secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("abc123")) {
		t.Fatal("the sealed bytes hold the secret")
	}
	again, _ := old.Seal("recipe run", secret)
	if bytes.Equal(sealed, again) {
		t.Error("two seals of one text are equal: the nonce is not random")
	}
	for name, k := range map[string]*Keys{"sealer": old, "after a rotation": rotated} {
		if got, err := k.Open("recipe run", sealed); err != nil || !bytes.Equal(got, secret) {
			t.Errorf("%s: Open = %q, %v", name, got, err)
		}
	}
	if _, err := next.Open("recipe run", sealed); !errors.Is(err, ErrUnsealed) {
		t.Errorf("another region's key opened it: %v", err)
	}
	if _, err := old.Open("another purpose", sealed); !errors.Is(err, ErrUnsealed) {
		t.Errorf("opened for another purpose: %v", err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := old.Open("recipe run", sealed); !errors.Is(err, ErrUnsealed) {
		t.Errorf("a changed byte opened: %v", err)
	}
	if _, err := old.Open("recipe run", []byte("x")); !errors.Is(err, ErrUnsealed) {
		t.Errorf("a short text opened: %v", err)
	}
}
