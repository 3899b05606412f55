#!/usr/bin/env bash
# Runs Firecrawl's own v2 end-to-end tests, as npm's @mendable/firecrawl-js
# ships them (src/__tests__/e2e/v2/), against `trawl dev` on loopback,
# unchanged but for the base URL, the key and the sites they call, which
# are loopback stand-ins (site.mjs). Not part of `make test`: it takes
# minutes. docs/firecrawl.md, "Firecrawl's own SDK tests", has the last
# results and why each failure fails.
#
#   bash scripts/firecrawl-sdk-e2e/run.sh [TEST_FILE_NAME...]   # e.g. scrape map
#
# Environment:
#   TRAWL_BIN=path     use this trawl binary instead of building one
#   BROWSERS=N|auto    trawl dev's --browsers (default auto: Chromium when
#                      installed, as `make run`; 0 has no browser)
#   JEST_WORKERS=N     test files run at once (default 3)
#   KEEP=1             leave the work directory (logs, report) in place
#
# What it does: installs the pinned npm packages (package.json and
# package-lock.json here: the SDK at internal/fcclient's version, jest,
# ts-jest, typescript) into ~/.cache/trawl/firecrawl-sdk-e2e with npm ci;
# starts the stand-in sites (127.0.0.2-6, free ports) and `trawl dev` (free
# ports, a price table with a high rate limit and a large grant); puts the
# stand-in web's pages in trawl's search index with `trawl index crawl`
# (Firecrawl's search answers from the web; trawl's from its index);
# copies the SDK's src/ with its jest config, replaces the target URLs of
# the test files (and nothing else) with the stand-ins'; runs jest with its
# JSON reporter; prints a table of every test; stops what it started.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${TRAWL_SDK_E2E_CACHE:-$HOME/.cache/trawl/firecrawl-sdk-e2e}
key=trawl_dev_e2e_0123456789abcdef
browsers=${BROWSERS:-auto}
workers=${JEST_WORKERS:-3}

command -v node >/dev/null || { echo "run.sh: node (18+) is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "run.sh: npm is required" >&2; exit 1; }
command -v curl >/dev/null || { echo "run.sh: curl is required" >&2; exit 1; }

# The SDK's version is the one trawl's own tests pin (internal/fcclient).
pin=$(sed -n 's/.*"@mendable\/firecrawl-js": "\([^"]*\)".*/\1/p' "$root/internal/fcclient/package.json")
mine=$(sed -n 's/.*"@mendable\/firecrawl-js": "\([^"]*\)".*/\1/p' "$here/package.json" | head -1)
[[ -n $pin && $pin == "$mine" ]] || {
  echo "run.sh: internal/fcclient pins @mendable/firecrawl-js $pin, scripts/firecrawl-sdk-e2e/package.json $mine: make them agree (and regenerate package-lock.json)" >&2
  exit 1
}

# 1. The npm packages, once per lock file.
mkdir -p "$cache"
lock_sum=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [[ ! -f $cache/.installed || $(cat "$cache/.installed") != "$lock_sum" ]]; then
  echo "run.sh: npm ci into $cache"
  cp "$here/package.json" "$here/package-lock.json" "$cache/"
  (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock_sum" >"$cache/.installed"
fi
sdk="$cache/node_modules/@mendable/firecrawl-js"

work=$(mktemp -d "${TMPDIR:-/tmp}/trawl-sdk-e2e.XXXXXX")
pids=()
cleanup() {
  local rc=$?
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    local p=${pids[i]}
    kill "$p" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$p" 2>/dev/null || true
  done
  # Failing tests are the report's business; a run that broke before
  # jest reported keeps its logs.
  if [[ ${KEEP:-} == 1 || ! -s $work/results.json ]]; then
    echo "run.sh: logs and report in $work"
  else
    rm -rf "$work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 2. trawl.
if [[ -n ${TRAWL_BIN:-} ]]; then
  trawl=$TRAWL_BIN
else
  trawl=$work/trawl
  echo "run.sh: go build ./cmd/trawl"
  for attempt in 1 2 3 4 5; do
    if (cd "$root" && go build -o "$trawl" ./cmd/trawl) 2>"$work/build.log"; then break; fi
    [[ $attempt == 5 ]] && { cat "$work/build.log" >&2; exit 1; }
    echo "run.sh: the build failed (others' work in progress?); again in 60 s" >&2
    sleep 60
  done
fi

# 3. The stand-in sites.
node "$here/site.mjs" "$work/sites.json" >"$work/sites.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do [[ -s $work/sites.json ]] && break; sleep 0.1; done
[[ -s $work/sites.json ]] || { cat "$work/sites.log" >&2; exit 1; }
site() { node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1]))[process.argv[2]])' "$work/sites.json" "$1"; }
docs=$(site docs) home=$(site home) github=$(site github) wiki=$(site wiki) hooks=$(site hooks)

# 4. trawl dev: free ports, a free plan with room for the suites' polling
#    (6,000 calls a minute, 50 at once) and a million credits, no cap.
read -r gate_port raft_port < <(node -e '
const net = require("net"); const ports = [];
const next = () => { const s = net.createServer(); s.listen(0, "127.0.0.1", () => { ports.push(s.address().port); s.close(() => ports.length < 2 ? next() : console.log(ports.join(" "))); }); };
next();')
cat >"$work/prices.json" <<'EOF'
{"grants": {"signup": "1000000.000"},
 "plans": {"free": {"rate_per_minute": 6000, "concurrency": 50, "keys": 2, "monthly_cap": "0.000"}}}
EOF
api=http://127.0.0.1:$gate_port
TRAWL_DEV_KEY=$key TRAWL_LEDGER_SECRET=sdk-e2e-secret "$trawl" dev --listen "127.0.0.1:$gate_port" \
  --ledger-raft "127.0.0.1:$raft_port" --data "$work/data" --allow-private-networks \
  --browsers "$browsers" --prices "$work/prices.json" >"$work/trawl.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do grep -q '"gate serving"' "$work/trawl.log" && break; sleep 0.5; done
grep -q '"gate serving"' "$work/trawl.log" || { tail -30 "$work/trawl.log" >&2; echo "run.sh: trawl dev did not start" >&2; exit 1; }
echo "run.sh: trawl dev at $api; sites: docs $docs, home $home, github $github, wiki $wiki, hooks $hooks"

# 5. The stand-in web in trawl's search index.
"$trawl" index crawl --gate "$api" --key "$key" --data "$work/index" --delay 20ms --depth 2 \
  "$wiki/" "$docs/" "$home/" >"$work/index.log" 2>&1 || { cat "$work/index.log" >&2; exit 1; }
echo "run.sh: index: $(tail -1 "$work/index.log")"
# The index answers for a page a moment after it was archived: wait until
# it knows the encyclopedia (a query no test asks).
for i in $(seq 1 60); do
  curl -fsS "$api/search?q=encyclopedia+articles" -H "Authorization: Bearer $key" | grep -q '"url"' && break
  [[ $i == 60 ]] && { echo "run.sh: the search index did not answer for the stand-in web in 60 s" >&2; exit 1; }
  sleep 1
done

# 6. The SDK's tests, their target URLs replaced. Only these quoted URL
#    strings change; queries (site:docs.firecrawl.dev) and assertions stay.
run=$cache/run
rm -rf "$run"
mkdir -p "$run"
cp -r "$sdk/src" "$sdk/jest.config.js" "$sdk/tsconfig.json" "$sdk/package.json" "$run/"
tests=$run/src/__tests__/e2e/v2
sed -i \
  -e "s#\"https://docs\.firecrawl\.dev\"#\"$docs\"#g" \
  -e "s#\"https://firecrawl\.dev\"#\"$home\"#g" \
  -e "s#\"https://github\.com\"#\"$github\"#g" \
  -e "s#\"https://example\.com/hook\"#\"$hooks/hook\"#g" \
  "$tests"/*.test.ts
for f in "$tests"/*.test.ts; do
  diff -u --label "a/${f#"$run"/}" --label "b/${f#"$run"/}" "$sdk/${f#"$run"/}" "$f" || true
done >"$work/rewrite.diff"
cp "$work/rewrite.diff" "$cache/last-rewrite.diff"
echo "run.sh: $(grep -c '^+ ' "$work/rewrite.diff") lines rewritten ($cache/last-rewrite.diff)"
if left=$(grep -no "https\?://[^\"' ]*" "$tests"/*.test.ts | grep -v "127\.0\.0\."); then
  echo "run.sh: URLs left in the tests (defaults the environment overrides):"; echo "$left" | sed 's#^.*/##; s/^/  /'
fi

# 7. jest, as the SDK's own "test" script runs it (ESM through ts-jest).
files=()
if (($#)); then
  for n in "$@"; do files+=("src/__tests__/e2e/v2/${n%.test.ts}.test.ts"); done
else
  # The SDK's own "test" script: src/__tests__/e2e/v2/*.test.ts (not utils/).
  files=($(cd "$run" && echo src/__tests__/e2e/v2/*.test.ts))
fi
echo "run.sh: jest ${files[*]} ($workers at once)"
set +e
(cd "$run" && env -u IDMUX_URL TEST_URL="$api" FIRECRAWL_API_URL="$api" TEST_API_KEY="$key" FIRECRAWL_API_KEY="$key" \
  NODE_OPTIONS=--experimental-vm-modules "$cache/node_modules/.bin/jest" --ci --maxWorkers="$workers" --forceExit \
  --json --outputFile="$work/results.json" "${files[@]}") >"$work/jest.log" 2>&1
jest_rc=$?
set -e
[[ -s $work/results.json ]] || { tail -50 "$work/jest.log" >&2; exit 1; }
cp "$work/results.json" "$cache/last-results.json"
cp "$work/jest.log" "$cache/last-jest.log"
cp "$work/trawl.log" "$cache/last-trawl.log"
echo
node "$here/report.mjs" "$work/results.json"
echo
echo "run.sh: jest's output: $cache/last-jest.log; trawl's log: $cache/last-trawl.log; report: $cache/last-results.json"
exit $jest_rc
