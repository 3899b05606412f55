package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// OpenStackProviderVersion is the cloud provider the cloud modules are
// checked with; scripts/deps.sh builds it from the Go module proxy into
// ~/.cache/trawl/terraform-provider-openstack-<version>/.
const OpenStackProviderVersion = "3.4.0"

func openstackProvider(t *testing.T) string {
	home, _ := os.UserHomeDir()
	p := filepath.Join(home, ".cache", "trawl", "terraform-provider-openstack-"+OpenStackProviderVersion,
		"terraform-provider-openstack_v"+OpenStackProviderVersion)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no OpenStack provider at %s: run `bash scripts/deps.sh test` (it builds it once from the Go module proxy)", p)
	}
	return p
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			if d.Name() == ".terraform" {
				return filepath.SkipDir
			}
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The OpenStack modules (cloud/openstack: a region's address, the region,
// its DNS names, the gates' PowerDNS for the nearest region, three regions
// together): formatted, valid against the
// real provider's schema, and their `tofu test` files pass with the cloud
// mocked (mock_provider). Nothing reaches a cloud: docs/terraform.md says
// what only an operator with an account can run.
func TestCloudModules(t *testing.T) {
	tofu := tofuPath(t)
	work := t.TempDir()
	mirror := filepath.Join(work, "mirror")
	dir := filepath.Join(mirror, "registry.opentofu.org", "terraform-provider-openstack", "openstack", OpenStackProviderVersion, runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A link, not a 37 MB copy: the mirror reads the file it points at.
	if err := os.Symlink(openstackProvider(t), filepath.Join(dir, "terraform-provider-openstack_v"+OpenStackProviderVersion)); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(work, "tofurc")
	if err := os.WriteFile(rc, []byte("provider_installation {\n  filesystem_mirror {\n    path = \""+mirror+"\"\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(work, "openstack")
	copyDir(t, filepath.Join("cloud", "openstack"), src)
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"TF_PLUGIN_CACHE_DIR=", "OS_CLOUD=", "OS_AUTH_URL=")
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(tofu, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tofu %s in %s: %v\n%s", strings.Join(args, " "), filepath.Base(dir), err, out)
		}
		return string(out)
	}
	run(src, "fmt", "-check", "-recursive", "-no-color")
	passed := regexp.MustCompile(`Success! (\d+) passed, 0 failed`)
	for mod, min := range map[string]int{"address": 1, "region": 6, "dns": 4, "three-regions": 4, "geodns": 10} {
		d := filepath.Join(src, mod)
		run(d, "init", "-input=false", "-no-color")
		run(d, "validate", "-no-color")
		out := run(d, "test", "-no-color")
		m := passed.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: tofu test:\n%s", mod, out)
		}
		if n, _ := strconv.Atoi(m[1]); n < min {
			t.Errorf("%s: tofu test ran fewer than %d runs:\n%s", mod, min, out)
		}
	}
}
