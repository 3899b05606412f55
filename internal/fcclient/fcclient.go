// Package fcclient locates Firecrawl's official JS SDK (npm's
// @mendable/firecrawl-js) that trawl's Firecrawl v2 compatibility tests
// drive with the machine's Node, against `trawl dev` (docs/firecrawl.md).
// Its version is the one of package.json and package-lock.json here;
// scripts/deps.sh (the test target) installs it with `npm ci` into Dir.
package fcclient

import (
	_ "embed"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

//go:embed package.json
var packageJSON []byte

// Package is the SDK's npm name.
const Package = "@mendable/firecrawl-js"

// Version is the pinned version of the SDK.
func Version() string {
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(packageJSON, &p); err != nil {
		panic(err)
	}
	return p.Dependencies[Package]
}

// Dir is where scripts/deps.sh installs it (TRAWL_FIRECRAWL_JS overrides
// it): node_modules is below it.
func Dir() string {
	if d := os.Getenv("TRAWL_FIRECRAWL_JS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "trawl", "firecrawl-js-"+Version())
}

// Find returns Dir if the SDK is installed there.
func Find() (string, error) {
	d := Dir()
	if _, err := os.Stat(filepath.Join(d, "node_modules", Package, "package.json")); err != nil {
		return "", errors.New("Firecrawl's JS SDK is not installed in " + d + " (run: bash scripts/deps.sh test)")
	}
	return d, nil
}
