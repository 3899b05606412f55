package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Restarting dev on the same data reuses its key: before, every start
// added another never-expiring key to the dev account.
func TestDevKeyIsKept(t *testing.T) {
	t.Setenv("TRAWL_DEV_KEY", "")
	dir := t.TempDir()
	first, err := devKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := devKey(dir)
	if err != nil || again != first {
		t.Fatalf("second start: key %q, %v; want %q", again, err, first)
	}
	fi, err := os.Stat(filepath.Join(dir, "dev-key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("dev-key file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	t.Setenv("TRAWL_DEV_KEY", "trawl_dev_from_the_environment")
	if k, _ := devKey(dir); k != "trawl_dev_from_the_environment" {
		t.Fatalf("TRAWL_DEV_KEY ignored: %q", k)
	}
	t.Setenv("TRAWL_DEV_KEY", "short")
	if _, err := devKey(dir); err == nil {
		t.Fatal("a 5-character key was accepted")
	}
}
