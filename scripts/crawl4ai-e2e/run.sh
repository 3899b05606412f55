#!/usr/bin/env bash
# Runs Crawl4AI's own Docker-API tests and client against `trawl crawl` on
# loopback. Nothing of Crawl4AI is committed here: the files are exported
# from a bare clone at run time into a temporary directory. See README.md.
#
#   scripts/crawl4ai-e2e/run.sh [pytest args...]
#
# Env: C4A_REPO (bare clone, default /work/.mirror/unclecode+crawl4ai/repo),
# C4A_REF (default v0.7.7), TRAWL (binary; default: go build into the temp dir),
# PORT (crawl server, default 18235), SITE_PORT (stand-in site, default 18236),
# KEEP=1 keeps the temp dir.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
repo=${C4A_REPO:-/work/.mirror/unclecode+crawl4ai/repo}
ref=${C4A_REF:-v0.7.7}
port=${PORT:-18235}
site_port=${SITE_PORT:-18236}
py=/usr/bin/python3 # Debian's: the packages below are Debian's

# Everything runs in a network namespace of its own with only loopback up:
# the targets the tests keep on purpose (invalid-url,
# nonexistent-domain-12345.com, the REST example's bare example.com) then
# fail at once, and nothing they try leaves the machine, not even a DNS
# query. The binary is built first, outside (the build may need the module
# proxy).
if [[ -z ${C4A_NETNS:-} ]]; then
  { command -v ip >/dev/null && [[ $(id -u) == 0 ]]; } ||
    { echo "run.sh: needs root and iproute2 (ip netns) to run in a namespace with only loopback" >&2; exit 2; }
  built=""
  if [[ -z ${TRAWL:-} ]]; then
    built=$(mktemp -d /tmp/crawl4ai-e2e-bin.XXXXXX)
    export TRAWL=$built/trawl
    (cd "$root" && nice -n 10 go build -o "$TRAWL" ./cmd/trawl)
  fi
  ns=c4a-e2e-$$
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  rc=0
  C4A_NETNS=$ns ip netns exec "$ns" "$BASH" "$0" "$@" || rc=$?
  ip netns del "$ns"
  [[ -z $built ]] || rm -rf "$built"
  exit "$rc"
fi

for m in httpx pytest pytest_asyncio pydantic lxml bs4 dotenv aiofiles psutil PIL numpy requests aiohttp rich nltk yaml xxhash aiosqlite snowballstemmer lark OpenSSL cssselect websockets; do
  "$py" -c "import $m" 2>/dev/null || { echo "run.sh: python module $m missing; install the Debian packages listed in README.md" >&2; exit 2; }
done

tmp=$(mktemp -d /tmp/crawl4ai-e2e.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ ${KEEP:-} == 1 ]] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

# Crawl4AI's package, tests and examples at $ref.
git -C "$repo" archive "$ref" crawl4ai tests/docker/test_server_requests.py \
  docs/examples/docker/demo_docker_api.py docs/releases_review/demo_v0.7.7.py \
  docs/examples/docker_python_sdk.py docs/examples/docker_config_obj.py docs/examples/docker_python_rest_api.py | tar -x -C "$tmp"
# A mirror without its largest blobs makes git archive complain about one
# it does not export; check that what is needed arrived.
for f in crawl4ai/__init__.py crawl4ai/docker_client.py tests/docker/test_server_requests.py \
  docs/examples/docker/demo_docker_api.py docs/releases_review/demo_v0.7.7.py; do
  [[ -s $tmp/$f ]] || { echo "run.sh: $f was not exported from $repo at $ref" >&2; exit 2; }
done
[[ $(git -C "$repo" ls-tree -r --name-only "$ref" crawl4ai | wc -l) == $(find "$tmp/crawl4ai" -type f | wc -l) ]] ||
  { echo "run.sh: crawl4ai/ was not exported whole" >&2; exit 2; }

# Import stubs for modules not in Debian (README.md says why each is safe).
stub() {
  local d="$tmp/stubs/$1"
  mkdir -p "$d"
  cp "$here/stub.py" "$d/__init__.py"
}
for m in rank_bm25 fake_useragent tiktoken playwright playwright/async_api litellm; do stub "$m"; done

# The loopback stand-in site: python's http.server over site/.
"$py" -m http.server "$site_port" --bind 127.0.0.1 --directory "$here/site" >"$tmp/site.log" 2>&1 &
pids+=($!)
site="http://127.0.0.1:$site_port"

# trawl crawl on loopback, its data in the temp dir.
bin=${TRAWL:-}
if [[ -z $bin ]]; then
  bin="$tmp/trawl"
  (cd "$root" && nice -n 10 go build -o "$bin" ./cmd/trawl)
fi
"$bin" crawl --listen "127.0.0.1:$port" --data "$tmp/data" --allow-private-networks >"$tmp/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "run.sh: trawl crawl did not start"; cat "$tmp/server.log"; exit 1; }

# The tests, with their internet targets pointed at the stand-ins (the only
# edits): httpbin's /html and /links/10/0, books.toscrape.com, python.org
# (whose domain also appears in a DomainFilter and an assertion).
t="$tmp/tests/docker/test_server_requests.py"
sed -i \
  -e "s#\"https://httpbin.org/html\"#\"$site/html.html\"#" \
  -e "s#\"https://httpbin.org/links/10/0\"#\"$site/links.html\"#" \
  -e "s#\"http://books.toscrape.com/\"#\"$site/books/\"#" \
  -e "s#^DEEP_CRAWL_URL = \"https://python.org\"#DEEP_CRAWL_URL = \"$site/py/\"#" \
  -e "s#\"docs.python.org\"#\"docs.127.0.0.1\"#" \
  -e "s#\"python.org\"#\"127.0.0.1\"#g" \
  "$t"

cd "$tmp"
set +e
CRAWL4AI_TEST_URL="http://127.0.0.1:$port" PYTHONPATH="$tmp/stubs:$tmp" PYTHONDONTWRITEBYTECODE=1 \
  "$py" -m pytest -p no:cacheprovider -q -rA "$t" "$@" 2>&1 | tee "$tmp/pytest.log"
rc=${PIPESTATUS[0]}
set -e
CRAWL4AI_TEST_URL="http://127.0.0.1:$port" SITE="$site" PYTHONPATH="$tmp/stubs:$tmp" \
  "$py" "$here/client_check.py" 2>&1 | tee "$tmp/client.log" || rc=1

# docs/examples/docker/demo_docker_api.py: every demo, targets on the stand-ins.
d="$tmp/docs/examples/docker/demo_docker_api.py"
sed -i \
  -e "s#\"https://httpbin.org/html\"#\"$site/html.html\"#" \
  -e "s#\"https://httpbin.org/links/10/0\"#\"$site/links.html\"#" \
  -e "s#\"https://httpbin.org/forms/post\"#\"$site/forms.html\"#" \
  -e "s#\"https://httpbin.org/ip\"#\"$site/ip.html\"#" \
  -e "s#\"http://books.toscrape.com/\"#\"$site/books/\"#" \
  -e "s#\"https://python.org\"#\"$site/py/\"#" \
  -e "s#\"https://example.com/page\([0-9]\)\"#\"$site/example/page\1.html\"#" \
  -e "s#\"https://example.com\"#\"$site/example.html\"#g" \
  -e "s#^DEEP_CRAWL_DOMAIN = \"docs.crawl4ai.com\"#DEEP_CRAWL_DOMAIN = \"127.0.0.1\"#" \
  "$d"
echo "--- docs/examples/docker/demo_docker_api.py"
CRAWL4AI_TEST_URL="http://127.0.0.1:$port" DEEP_CRAWL_TEST_SITE="$site/deepcrawl/" PYTHONPATH="$tmp/stubs:$tmp" \
  "$py" "$here/examples_check.py" "$d" 2>&1 | tee "$tmp/examples.log" || rc=1

# docs/releases_review/demo_v0.7.7.py (the monitor release demo), as is
# but for the server's address and its three internet pages. It catches
# each demo's exception and prints "Demo N error"; any such line fails.
r="$tmp/docs/releases_review/demo_v0.7.7.py"
sed -i \
  -e "s#localhost:11235#127.0.0.1:$port#g" \
  -e "s#https://httpbin.org/html#$site/html.html#g" \
  -e "s#https://httpbin.org/json#$site/json.json#g" \
  -e "s#\"https://example.com\"#\"$site/example.html\"#g" \
  "$r"
echo "--- docs/releases_review/demo_v0.7.7.py"
(cd "$tmp" && timeout 600 "$py" "$r" >"$tmp/demo077.log" 2>&1) || true
if grep -E "Demo [0-9]+ error|Demo failed|Cannot connect" "$tmp/demo077.log"; then
  echo "FAIL demo_v0.7.7.py"; rc=1
elif grep -q "Demo completed" "$tmp/demo077.log"; then
  echo "PASS demo_v0.7.7.py (8 demos, no error)"
else
  echo "FAIL demo_v0.7.7.py: did not complete"; tail -5 "$tmp/demo077.log"; rc=1
fi
# docs/examples/docker_python_sdk.py, docker_config_obj.py (interactive:
# Enter is fed), docker_python_rest_api.py: run as scripts against the
# server (their localhost:8000) and the stand-ins. The first two pass on
# exit status 0 with no error printed; the REST one catches its errors and
# prints "Error: ..." lines, each listed.
for ex in docker_python_sdk docker_config_obj docker_python_rest_api; do
  f="$tmp/docs/examples/$ex.py"
  sed -i \
    -e "s#http://localhost:8000#http://127.0.0.1:$port#g" \
    -e "s#\"https://example.com/page\([0-9]\)\"#\"$site/example/page\1.html\"#g" \
    -e "s#\"https://example.com\"#\"$site/example.html\"#g" \
    -e "s#\"https://python.org\"#\"$site/py/\"#g" \
    -e "s#\"https://www.python.org\"#\"$site/py/\"#g" \
    -e "s#\"https://news.ycombinator.com/news\"#\"$site/links.html\"#g" \
    -e "s#\"https://github.com/trending\"#\"$site/books/\"#g" \
    "$f"
  echo "--- docs/examples/$ex.py"
  ex_rc=0
  (cd "$tmp" && printf '\n\n\n\n\n\n\n\n' | PYTHONPATH="$tmp/stubs:$tmp" timeout 600 "$py" "$f" >"$tmp/$ex.log" 2>&1) || ex_rc=$?
  errs=$(grep -E "^Error|Error: |Traceback|Exception" "$tmp/$ex.log" | sort | uniq -c || true)
  if [[ $ex_rc == 0 && -z $errs ]]; then
    echo "PASS $ex.py"
  else
    echo "FAIL $ex.py (exit $ex_rc)"; echo "$errs" | head -20; rc=1
  fi
done
exit $rc
