// Package pwdriver declares the one Playwright driver trawl runs: the
// playwright-core release that playwright-go (go.mod) speaks to, and where
// `bash scripts/deps.sh browser` unpacks it. scripts/deps.sh reads Version
// from this file (the line `const Version = "..."`), so this is the only
// place to change it.
package pwdriver

import (
	"os"
	"path/filepath"
)

// Version is the playwright-core release playwright-go v0.5200.x speaks to.
const Version = "1.52.0"

// DefaultDir is where scripts/deps.sh unpacks the driver: the directory
// that holds package/cli.js. Empty when there is no home directory.
func DefaultDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "trawl", "playwright-driver-"+Version)
}
