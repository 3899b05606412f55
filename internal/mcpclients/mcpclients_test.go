package mcpclients

import (
	"os"
	"strings"
	"testing"
)

// The versions are pinned exactly, and the lock file holds the same ones.
func TestVersionsPinned(t *testing.T) {
	s, i := Versions()
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"sdk": s, "inspector-cli": i} {
		if v == "" || strings.ContainsAny(v, "^~<>=* ") {
			t.Errorf("%s: version %q is not pinned", name, v)
		}
		if !strings.Contains(string(lock), `"node_modules/@modelcontextprotocol/`+name+`": {`+"\n"+`      "version": "`+v+`"`) {
			t.Errorf("package-lock.json does not hold %s %s", name, v)
		}
	}
	if !strings.HasSuffix(Dir(), "mcp-clients-"+s+"-"+i) && os.Getenv("TRAWL_MCP_CLIENTS") == "" {
		t.Errorf("Dir %s", Dir())
	}
}
