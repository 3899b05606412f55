#!/usr/bin/env bash
# Installs what a target needs on a fresh Debian 12 machine, and nothing that
# is already there. Never installs Debian's nodejs/npm (they would replace the
# machine's Node).
set -euo pipefail
what=${1:-build}

# The Playwright driver (playwright-core) the browser engine runs is declared
# once, in Go: internal/pwdriver/pwdriver.go (checked by its tests).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pw_version=$(sed -n 's/^const Version = "\([0-9][0-9.]*\)"$/\1/p' "$root/internal/pwdriver/pwdriver.go")
[[ -n $pw_version ]] || { echo "deps: no 'const Version = \"x.y.z\"' line in internal/pwdriver/pwdriver.go" >&2; exit 1; }

need_apt=()
want() { dpkg -s "$1" >/dev/null 2>&1 || need_apt+=("$1"); }

case "$what" in
driver-version) echo "$pw_version"; exit 0 ;;
build) ;;
test) want postgresql-doc-15; want python3.11-doc; want chromium; want tinyproxy; want systemd; want pdns-server; want pdns-backend-bind; want pdns-backend-geoip ;;
browser) want chromium ;;
bench) want postgresql-doc-15; want python3.11-doc; want wrk; want jq; want curl ;;
*) echo "deps.sh: unknown target $what" >&2; exit 2 ;;
esac

if ((${#need_apt[@]})); then
  echo "deps: installing ${need_apt[*]}"
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # The image may delete downloaded archives between batches: try twice.
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null ||
    $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # The tinyproxy package starts a system proxy on :8888; the proxy tests
  # start their own instance on a free loopback port, so stop it (there may
  # be no systemd in a container).
  if [[ " ${need_apt[*]} " == *" tinyproxy "* ]]; then
    $SUDO service tinyproxy stop >/dev/null 2>&1 || true
    $SUDO update-rc.d tinyproxy disable >/dev/null 2>&1 || true
    $SUDO systemctl disable --now tinyproxy >/dev/null 2>&1 || true
  fi
  # PowerDNS (terraform's TestGeoDNS* run their own pdns_server on a free
  # loopback port with its own configuration): where the package started
  # its default instance (port 53), stop it.
  if [[ " ${need_apt[*]} " == *" pdns-server "* ]]; then
    $SUDO service pdns stop >/dev/null 2>&1 || true
    $SUDO update-rc.d pdns disable >/dev/null 2>&1 || true
    $SUDO systemctl disable --now pdns >/dev/null 2>&1 || true
  fi
fi

command -v go >/dev/null || { echo "deps: Go is required (https://go.dev/dl)" >&2; exit 1; }
go mod download
[[ $what != test ]] || (cd "$root/deploy" && go mod download)
[[ $what != test ]] || (cd "$root/terraform" && go mod download)

# Stripe's own API mock, for the payment provider's tests (pinned: the tests
# check ids from this version's fixtures).
if [[ $what == test ]]; then
  command -v stripe-mock >/dev/null || [[ -x "$(go env GOPATH)/bin/stripe-mock" ]] ||
    go install github.com/stripe/stripe-mock@v0.203.0
fi

# The OpenTofu CLI for the Terraform provider's acceptance test
# (terraform/): built once from the Go module proxy (`go install` refuses the
# module's replace directives), about 10 minutes of CPU, then cached by
# version like the Playwright driver. The version is terraform/'s
# TofuVersion.
if [[ $what == test ]]; then
  tofu_version=$(sed -n 's/^const TofuVersion = "\([0-9][0-9.]*\)"$/\1/p' "$root/terraform/acceptance_test.go")
  [[ -n $tofu_version ]] || { echo "deps: no TofuVersion in terraform/acceptance_test.go" >&2; exit 1; }
  tofu="${HOME}/.cache/trawl/tofu-${tofu_version}/tofu"
  if [[ ! -x $tofu ]]; then
    echo "deps: building OpenTofu $tofu_version from the Go module proxy into $tofu (once; ~10 min)"
    tofu_src=$(cd "$root/terraform" && go mod download -json "github.com/opentofu/opentofu@v$tofu_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [[ -d $tofu_src ]] || { echo "deps: go mod download github.com/opentofu/opentofu@v$tofu_version gave no directory" >&2; exit 1; }
    mkdir -p "$(dirname "$tofu")"
    (cd "$tofu_src" && CGO_ENABLED=0 nice -n 10 go build -o "$tofu.tmp" ./cmd/tofu)
    mv "$tofu.tmp" "$tofu"
  fi
fi

# The OpenStack provider the cloud modules are checked with (tofu validate
# and tofu test with a mocked cloud: terraform/cloud_test.go), built the same
# way; the version is terraform/'s OpenStackProviderVersion.
if [[ $what == test ]]; then
  os_version=$(sed -n 's/^const OpenStackProviderVersion = "\([0-9][0-9.]*\)"$/\1/p' "$root/terraform/cloud_test.go")
  [[ -n $os_version ]] || { echo "deps: no OpenStackProviderVersion in terraform/cloud_test.go" >&2; exit 1; }
  osp="${HOME}/.cache/trawl/terraform-provider-openstack-${os_version}/terraform-provider-openstack_v${os_version}"
  if [[ ! -x $osp ]]; then
    echo "deps: building the OpenStack provider $os_version from the Go module proxy into $osp (once; ~3 min)"
    os_src=$(cd "$root/terraform" && go mod download -json "github.com/terraform-provider-openstack/terraform-provider-openstack/v3@v$os_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [[ -d $os_src ]] || { echo "deps: go mod download of the OpenStack provider $os_version gave no directory" >&2; exit 1; }
    mkdir -p "$(dirname "$osp")"
    (cd "$os_src" && CGO_ENABLED=0 nice -n 10 go build -o "$osp.tmp" .)
    mv "$osp.tmp" "$osp"
  fi
fi

# promtool, for the deploy tests of the alert rules (deploy/compose/alerts.yml):
# taken out of Debian's prometheus package without installing it (that
# would start a Prometheus server on the machine).
if [[ $what == test && ! -x ${HOME}/.cache/trawl/promtool/promtool ]]; then
  echo "deps: unpacking promtool from Debian's prometheus package into ~/.cache/trawl/promtool"
  tmp=$(mktemp -d)
  if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    (cd "$tmp" && apt-get download prometheus >/dev/null)
  fi
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  mkdir -p "${HOME}/.cache/trawl/promtool"
  cp "$tmp/x/usr/bin/promtool" "${HOME}/.cache/trawl/promtool/promtool"
  rm -rf "$tmp"
fi

# Headless Chromium for the browser tests (internal/browsertest): Debian's
# chromium, driven by playwright-go through the driver of the matching
# playwright-core, unpacked from the npm registry (playwright's own installer
# downloads from a CDN, which is not reachable). The tests find it here, or
# wherever PLAYWRIGHT_DRIVER_PATH points.
if [[ $what == test || $what == browser ]]; then
  driver="${HOME}/.cache/trawl/playwright-driver-${pw_version}"
  if [[ ! -f $driver/package/cli.js ]]; then
    command -v npm >/dev/null || { echo "deps: npm (with Node 18+) is required for the browser tests" >&2; exit 1; }
    echo "deps: unpacking playwright-core $pw_version into $driver"
    tmp=$(mktemp -d)
    if ! out=$(cd "$tmp" && npm pack --silent "playwright-core@$pw_version" 2>&1 && mkdir -p x && tar -xzf "playwright-core-$pw_version.tgz" -C x 2>&1); then
      echo "$out" >&2; rm -rf "$tmp"; exit 1
    fi
    rm -rf "$driver" && mkdir -p "$(dirname "$driver")" && mv "$tmp/x" "$driver"
    rm -rf "$tmp"
  fi
fi

# Firecrawl's JS SDK, which the Firecrawl v2 compatibility tests drive
# (cmd/trawl, docs/firecrawl.md): npm's @mendable/firecrawl-js at the
# version of internal/fcclient/package-lock.json, installed with `npm ci`
# into a cache directory named after it (internal/fcclient.Dir).
if [[ $what == test ]]; then
  fc_src="$root/internal/fcclient"
  fc_ver=$(sed -n 's/.*"@mendable\/firecrawl-js": "\([0-9][0-9.]*\)".*/\1/p' "$fc_src/package.json")
  [[ $fc_ver =~ ^[0-9.]+$ ]] || { echo "deps: cannot read the Firecrawl SDK version from $fc_src/package.json" >&2; exit 1; }
  fc_dir="${HOME}/.cache/trawl/firecrawl-js-${fc_ver}"
  if [[ ! -f $fc_dir/node_modules/@mendable/firecrawl-js/package.json ]]; then
    command -v npm >/dev/null || { echo "deps: npm (with Node 18+) is required for the Firecrawl SDK tests" >&2; exit 1; }
    echo "deps: installing Firecrawl's JS SDK ($fc_ver) into $fc_dir"
    tmp=$(mktemp -d)
    cp "$fc_src/package.json" "$fc_src/package-lock.json" "$tmp/"
    if ! out=$(cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund 2>&1); then
      echo "$out" >&2; rm -rf "$tmp"; exit 1
    fi
    rm -rf "$fc_dir" && mkdir -p "$(dirname "$fc_dir")" && mv "$tmp" "$fc_dir"
  fi
fi

# The official MCP clients the tool server's tests drive (gate/mcp, docs/mcp.md):
# npm's @modelcontextprotocol/sdk and @modelcontextprotocol/inspector-cli at
# the versions of internal/mcpclients/package-lock.json, installed with
# `npm ci` into a cache directory named after them (internal/mcpclients.Dir).
if [[ $what == test ]]; then
  mcp_src="$root/internal/mcpclients"
  mcp_tag=$(sed -n 's/.*"@modelcontextprotocol\/\(sdk\|inspector-cli\)": "\([0-9][0-9.]*\)".*/\2/p' "$mcp_src/package.json" | paste -sd- -)
  [[ $mcp_tag =~ ^[0-9.]+-[0-9.]+$ ]] || { echo "deps: cannot read the MCP client versions from $mcp_src/package.json" >&2; exit 1; }
  mcp_dir="${HOME}/.cache/trawl/mcp-clients-${mcp_tag}"
  if [[ ! -f $mcp_dir/node_modules/@modelcontextprotocol/inspector-cli/package.json || ! -f $mcp_dir/node_modules/@modelcontextprotocol/sdk/package.json ]]; then
    command -v npm >/dev/null || { echo "deps: npm (with Node 18+) is required for the MCP client tests" >&2; exit 1; }
    echo "deps: installing the MCP clients ($mcp_tag) into $mcp_dir"
    tmp=$(mktemp -d)
    cp "$mcp_src/package.json" "$mcp_src/package-lock.json" "$tmp/"
    if ! out=$(cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund 2>&1); then
      echo "$out" >&2; rm -rf "$tmp"; exit 1
    fi
    rm -rf "$mcp_dir" && mkdir -p "$(dirname "$mcp_dir")" && mv "$tmp" "$mcp_dir"
  fi
fi
