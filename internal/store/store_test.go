package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func openMem(t *testing.T) *Store {
	t.Helper()
	s, err := Open("db", &Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestGetSetDelete(t *testing.T) {
	s := openMem(t)
	if _, err := s.Get([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: got %v, want ErrNotFound", err)
	}
	buf := []byte("v1")
	if err := s.Set([]byte("k"), buf, Sync); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X' // the store must have copied the value
	got, err := s.Get([]byte("k"))
	if err != nil || string(got) != "v1" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := s.Delete([]byte("k"), NoSync); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestBatchIsAtomicAndScanOrdered(t *testing.T) {
	s := openMem(t)
	b := s.NewBatch()
	for i := 9; i >= 0; i-- {
		b.Set(fmt.Appendf(nil, "p/%02d", i), fmt.Appendf(nil, "%d", i))
	}
	b.Set([]byte("q/0"), []byte("other prefix"))
	if _, err := s.Get([]byte("p/00")); !errors.Is(err, ErrNotFound) {
		t.Fatal("batch visible before commit")
	}
	if err := b.Commit(Sync); err != nil {
		t.Fatal(err)
	}
	var keys []string
	err := s.Scan([]byte("p/"), []byte("p/05"), func(k, v []byte) (bool, error) {
		keys = append(keys, string(k))
		return len(keys) < 3, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"p/05", "p/06", "p/07"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("scan = %v, want %v", keys, want)
	}
	stop := errors.New("stop")
	if err := s.Scan([]byte("p/"), nil, func(k, v []byte) (bool, error) { return false, stop }); err != stop {
		t.Fatalf("scan error not returned: %v", err)
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a/", "a0"},
		{"a\xff", "b"},
		{"\xff\xff", ""},
	} {
		if got := string(PrefixEnd([]byte(tc.in))); got != tc.want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestExpiring(t *testing.T) {
	s := openMem(t)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.SetExpiring([]byte("c/a"), []byte("A"), now.Add(time.Minute), NoSync); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.SetExpiring([]byte("c/b"), []byte("B"), now.Add(time.Hour))
	if err := b.Commit(NoSync); err != nil {
		t.Fatal(err)
	}
	v, exp, err := s.GetLive(nil, []byte("c/a"), now)
	if err != nil || string(v) != "A" || !exp.Equal(now.Add(time.Minute)) {
		t.Fatalf("GetLive = %q %v %v", v, exp, err)
	}
	later := now.Add(2 * time.Minute)
	if _, _, err := s.GetLive(nil, []byte("c/a"), later); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired entry returned: %v", err)
	}
	n, err := s.SweepExpired([]byte("c/"), later)
	if err != nil || n != 1 {
		t.Fatalf("SweepExpired = %d, %v; want 1", n, err)
	}
	if _, _, err := s.GetLive(nil, []byte("c/b"), later); err != nil {
		t.Fatalf("live entry swept: %v", err)
	}
}

func TestReopenKeepsSyncedWrites(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("k"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("after reopen: %q %v", v, err)
	}
}

func TestDeletePrefix(t *testing.T) {
	s := openMem(t)
	for _, k := range []string{"j/1/a", "j/1/b", "j/10/a", "j/2/a"} {
		if err := s.Set([]byte(k), []byte("x"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeletePrefix([]byte("j/1/"), Sync); err != nil {
		t.Fatal(err)
	}
	var left []string
	s.Scan([]byte("j/"), nil, func(k, v []byte) (bool, error) {
		left = append(left, string(k))
		return true, nil
	})
	if fmt.Sprint(left) != "[j/10/a j/2/a]" {
		t.Fatalf("left %v", left)
	}
}

func TestSnapshotIsolation(t *testing.T) {
	s := openMem(t)
	s.Set([]byte("k/1"), []byte("a"), NoSync)
	snap := s.NewSnapshot()
	defer snap.Close()
	s.Set([]byte("k/2"), []byte("b"), NoSync)
	s.Delete([]byte("k/1"), NoSync)
	var seen []string
	snap.Scan([]byte("k/"), nil, func(k, v []byte) (bool, error) {
		seen = append(seen, string(k)+"="+string(v))
		return true, nil
	})
	if fmt.Sprint(seen) != "[k/1=a]" {
		t.Fatalf("snapshot saw %v", seen)
	}
}
