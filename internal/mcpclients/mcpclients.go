// Package mcpclients locates the official MCP clients (npm's
// @modelcontextprotocol/sdk and @modelcontextprotocol/inspector-cli) that
// the tool server's tests drive with the machine's Node. Their versions are
// those of package.json and package-lock.json here; scripts/deps.sh (the
// test target) installs them with `npm ci` into Dir.
package mcpclients

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

//go:embed package.json
var packageJSON []byte

// Versions are the pinned versions of the SDK and the inspector's CLI.
func Versions() (sdk, inspector string) {
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(packageJSON, &p); err != nil {
		panic(err)
	}
	return p.Dependencies["@modelcontextprotocol/sdk"], p.Dependencies["@modelcontextprotocol/inspector-cli"]
}

// Dir is where scripts/deps.sh installs them (TRAWL_MCP_CLIENTS
// overrides it): node_modules is below it.
func Dir() string {
	if d := os.Getenv("TRAWL_MCP_CLIENTS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	s, i := Versions()
	return filepath.Join(home, ".cache", "trawl", fmt.Sprintf("mcp-clients-%s-%s", s, i))
}

// Find returns Dir if both clients are installed there.
func Find() (string, error) {
	d := Dir()
	for _, p := range []string{"@modelcontextprotocol/sdk", "@modelcontextprotocol/inspector-cli"} {
		if _, err := os.Stat(filepath.Join(d, "node_modules", p, "package.json")); err != nil {
			return "", errors.New("the MCP clients are not installed in " + d + " (run: bash scripts/deps.sh test)")
		}
	}
	return d, nil
}

// InspectorCLI is the inspector's CLI (its build/index.js; build/cli.js is the
// launcher of the web inspector), run with node.
func InspectorCLI(dir string) string {
	return filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build", "index.js")
}
