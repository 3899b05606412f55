// Package adapttest runs the Caddyfile golden tests of the gate's modules,
// as Caddy's caddytest/integration/caddyfile_adapt does: each
// testdata/*.caddyfiletest holds a Caddyfile, a line of dashes, and the JSON
// Caddy adapts it to. `go test -update` rewrites the JSON (review the diff).
package adapttest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

var update = flag.Bool("update", false, "rewrite the JSON of testdata/*.caddyfiletest")

// Separator is the line between the Caddyfile and its JSON.
const Separator = "\n----------\n"

// Run adapts each testdata/*.caddyfiletest and compares the JSON.
func Run(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob("testdata/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in, want, found := strings.Cut(string(raw), Separator)
			if !found {
				t.Fatalf("no %q line", strings.TrimSpace(Separator))
			}
			got, err := Adapt(in)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(file, []byte(in+Separator+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Fatalf("JSON\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// Adapt adapts a Caddyfile to indented JSON; a warning is an error.
func Adapt(caddyfile string) (string, error) {
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return "", err
	}
	if len(warnings) > 0 {
		return "", &warningError{warnings}
	}
	var b bytes.Buffer
	if err := json.Indent(&b, out, "", "\t"); err != nil {
		return "", err
	}
	b.WriteByte('\n')
	return b.String(), nil
}

type warningError struct{ w []caddyconfig.Warning }

func (e *warningError) Error() string {
	var s []string
	for _, w := range e.w {
		s = append(s, w.String())
	}
	return "warnings: " + strings.Join(s, "; ")
}
