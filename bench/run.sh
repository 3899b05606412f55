#!/usr/bin/env bash
# make bench: whole-system figures for trawl, each beside a baseline measured
# in the same run on the same machine, so the ratio survives a noisy host.
#
#   1. content pipeline per page  vs  JSDOM + Readability + Turndown(+GFM)
#   2. /scrape cache hits (wrk)   vs  Go http.FileServer serving the pages raw
#      (the cell behind bench/cellfront: each request signed on arrival)
#   3. 10,000-URL /scrape/jobs    vs  raw GETs of the same URLs, same concurrency
#      (trawl cell; bench/loadgen signs its requests)
#   4. ledger (bench/ledger): durable charges/s through ledger.Client on a
#      one-voter Raft ledger  vs  one synced Pebble write per charge; latency
#      of a charge 150 ms from the leader  vs  a Settle through Raft per charge
#   5. gate: /scrape cache hits through `trawl dev`'s gate  vs  the same
#      requests straight at a cell (bench/cellfront) and through a plain Caddy
#      reverse_proxy to it (bench/caddyplain), interleaved rounds, under load
#      and at 1 connection
#   1b. articles: the content pipeline on the article extraction benchmark's
#      181 news and blog pages (../shared/data/aeb) vs JSDOM + Readability +
#      Turndown(+GFM), and bench/aeb's F1 with the benchmark's metric beside
#      go-trafilatura and go-readability on the same pages
#   6. browser (bench/browser): browser-engine pages/s, p50/p99, Chromium
#      PSS after 1,000 pages vs 10, bursts of 100 at 10/50/100 concurrent
#      vs  the same cell's plain HTTP engine and bare Chromium (playwright-go)
#   7. extract (bench/extract): deterministic POST /extract of cached pages
#      through `trawl dev`'s gate, p50/p99 at one request at a time  vs
#      POST /scrape of the same pages through the same gate, interleaved
#   7b. crawl (bench/crawl): Firecrawl's POST /v2/crawl of 1,000 pages of
#      the corpus through `trawl dev`, pages/s  vs  the same URLs as one
#      batch scrape (a job) on a fresh `trawl dev`
#   8. search (regiontest TestSearchSpeed): 10,000 pages of
#      postgresql-doc-15 and python3.11-doc served from loopback, fetched,
#      archived and indexed through jobs; search p50/p99 (plain, rich=1)
#      through the gate  vs  SQLite FTS5 over the same pages in process (any of the words, title 10);
#      the cell's indexing rate beside a running job  vs  FTS5's on the
#      same (already converted) pages; index size and RSS
#   8b. searchq (regiontest TestSearchQuality): ranking quality through the
#      gate on documentation packages never tuned on (known-item queries
#      from each package's own back-of-book index), MRR@10 and success@10
#      vs  SQLite FTS5 bm25 (title weighted) over the same pages, same run
#   8c. metaq (bench/metaeval): headline, author and publish date read from
#      article pages with their JSON-LD and meta tags removed, held-out
#      pages  vs  go-trafilatura's metadata on the same pages, same run
#   9. jobshare (cmd/trawl TestJobsScaleAcrossCells): one job of 10,000 URLs
#      on a loopback site whose every page takes 200 ms, through the gate,
#      on a region of three clustered cells (three cell processes sharing
#      job URLs through JetStream)  vs  one cell (`trawl dev`), the same
#      --job-concurrency per cell, same run
#
# A cell answers only requests its region's gate signed (internal/regionauth).
# Every `trawl cell` and `trawl dev` here runs with one bench key in
# TRAWL_REGION_KEYS, and bench/loadgen and bench/browser sign their requests
# to it with that key (account acct_bench). wrk cannot sign, so where wrk goes
# "direct at the cell" it hits bench/cellfront: a cell of the same code and
# defaults served in its own process behind a handler that signs each request
# on arrival, then the cell checks it, as behind the gate, with no proxy hop.
#
# Prints a Markdown table and writes it to bench/results.md. See bench/README.md
# for the knobs (environment variables below) and for running one part alone.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg) # for the table's header
BENCH=$REPO/bench

CORPUS=${BENCH_CORPUS:-/usr/share/doc/postgresql-doc-15/html}
AEB=${BENCH_AEB:-$REPO/../shared/data/aeb}   # the article extraction benchmark (articles part)
ALL_PARTS=pipeline,articles,scrape,job,ledger,gate,browser,extract,crawl,search,searchq,metaq,jobshare
ONLY=${BENCH_ONLY:-$ALL_PARTS}                   # comma list of parts to run
PIPELINE_WARMUP=${BENCH_PIPELINE_WARMUP:-100}    # pages before timing
WRK_THREADS=${BENCH_WRK_THREADS:-2}
WRK_CONNS=${BENCH_WRK_CONNS:-32}
WRK_DURATION=${BENCH_WRK_DURATION:-10s}
SCRAPE_URLS=${BENCH_SCRAPE_URLS:-200}
JOB_URLS=${BENCH_JOB_URLS:-10000}
JOB_CONCURRENCY=${BENCH_JOB_CONCURRENCY:-16}     # cell --job-concurrency, and the raw-fetch baseline's
JOB_TIMEOUT=${BENCH_JOB_TIMEOUT:-15m}
TRAWL=${BENCH_TRAWL:-$REPO/bin/trawl}
LEDGER_CALLERS=${BENCH_LEDGER_CALLERS:-256,1024} # concurrent callers of the throughput rows
LEDGER_DURATION=${BENCH_LEDGER_DURATION:-5s}     # timed window per side and concurrency
LEDGER_DELAY=${BENCH_LEDGER_DELAY:-150ms}        # one-way delay between the Client's region and the leader
LEDGER_PROFILE=${BENCH_LEDGER_PROFILE:-}         # CPU profile of the first trawl window (+ its settling) to this file
LEDGER_DIAGNOSE=${BENCH_LEDGER_DIAGNOSE:-1}      # 1: also the Client over a null ledger (no Raft): where the time goes
GATE_URLS=${BENCH_GATE_URLS:-300}               # distinct warmed URLs the gate part rotates over
GATE_ROUNDS=${BENCH_GATE_ROUNDS:-5}              # interleaved rounds (direct, plain, plaincell, gate); the median is reported
GATE_DURATION=${BENCH_GATE_DURATION:-4s}         # wrk run under load (-t$WRK_THREADS -c$WRK_CONNS), per side and round
GATE_LOW_DURATION=${BENCH_GATE_LOW_DURATION:-2s} # wrk run at low load (-t1 -c1: one request at a time), per side and round
GATE_PERF=${BENCH_GATE_PERF:-}                   # file: perf profile of the trawl process during one more gate run
STRICT=${BENCH_STRICT:-0}                        # 1: exit 1 when a target is missed
RESULTS=${BENCH_RESULTS:-$BENCH/results.md}

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
want() { [[ ",$ONLY," == *",$1,"* ]]; }
# The pipeline, scrape and job parts read the corpus through the file server.
want_corpus() { want pipeline || want scrape || want job || want gate || want browser || want extract || want crawl; }

# ---------------------------------------------------------------- setup

need_apt=()
if want_corpus; then
	[[ -d $CORPUS ]] || { [[ $CORPUS == /usr/share/doc/postgresql-doc-15/html ]] && need_apt+=(postgresql-doc-15); }
	command -v wrk >/dev/null || need_apt+=(wrk)
	command -v curl >/dev/null || need_apt+=(curl)
fi
command -v jq >/dev/null || need_apt+=(jq)
if ((${#need_apt[@]})); then
	log "installing ${need_apt[*]}"
	SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
	$SUDO apt-get update -qq
	# Twice: the image may drop downloaded archives between batches.
	for _ in 1 2; do
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null && break
	done
fi
! want_corpus || [[ -d $CORPUS ]] || die "corpus $CORPUS not found"

if want articles && [[ ! -f $AEB/ground-truth.json ]]; then
	log "articles: $AEB not found, part skipped (BENCH_AEB names it)"
	ONLY=${ONLY//articles/}
fi

if want pipeline || want articles; then
	# Node comes from the machine, never from apt here: jsdom 29 needs >= 20.19.
	command -v node >/dev/null || die "node not found (need >= 20.19 for jsdom 29)"
	node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)' ||
		die "node $(node --version) is too old for jsdom 29 (need >= 20.19)"
	if [[ ! -f $BENCH/js/node_modules/.package-lock.json || $BENCH/js/package-lock.json -nt $BENCH/js/node_modules/.package-lock.json ]]; then
		log "npm ci (bench/js)"
		(cd "$BENCH/js" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	fi
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/trawl-bench.XXXXXX")
PIDS=()
cleanup() {
	local rc=$? pid
	for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	if ((rc != 0)) && [[ ${BENCH_KEEP:-0} == 1 ]]; then
		echo "bench: logs kept in $WORK" >&2
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: run CMD in its own process group (so cleanup can end it
# and anything it spawns), output to $WORK/NAME.log; sets LAST_PID.
start() {
	local name=$1; shift
	setsid "$@" >"$WORK/$name.log" 2>&1 &
	LAST_PID=$!
	PIDS+=("$LAST_PID")
}

# wait_until WHAT SECONDS PID CMD...: poll CMD until it succeeds; fail when the
# deadline passes or PID (the process we wait for) has died.
wait_until() {
	local what=$1 limit=$2 pid=$3; shift 3
	local deadline=$((SECONDS + limit))
	until "$@" >/dev/null 2>&1; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 30 "$WORK"/*.log >&2 || true
			die "$what exited while starting"
		fi
		((SECONDS < deadline)) || { tail -n 30 "$WORK"/*.log >&2 || true; die "$what not ready after ${limit}s"; }
		sleep 0.1
	done
}

stop() { # stop PID: end one started process group and wait for it
	local pid=$1
	kill -TERM -- "-$pid" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL -- "-$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	local keep=() p
	for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}

log "building bench tools"
mkdir -p "$WORK/bin"
go build -o "$WORK/bin/" ./bench/fileserver ./bench/loadgen
if want pipeline || want articles; then
	go build -o "$WORK/bin/" ./bench/pipeline || die "bench/pipeline does not build (cell/content)"
fi
if want articles; then
	go build -o "$WORK/bin/" ./bench/aeb || die "bench/aeb does not build (cell/content)"
fi
if want ledger; then
	go build -o "$WORK/bin/" ./bench/ledger || die "bench/ledger does not build (ledger)"
fi
if want gate; then
	go build -o "$WORK/bin/" ./bench/caddyplain || die "bench/caddyplain does not build (Caddy)"
fi
if want browser; then
	go build -o "$WORK/bin/" ./bench/browser || die "bench/browser does not build (cell/fetch/browser)"
fi
if want scrape || want gate; then
	go build -o "$WORK/bin/" ./bench/cellfront || die "bench/cellfront does not build (cell)"
fi
if want extract; then
	go build -o "$WORK/bin/" ./bench/extract || die "bench/extract does not build"
fi
if want crawl; then
	go build -o "$WORK/bin/" ./bench/crawl || die "bench/crawl does not build"
fi
if want scrape || want job || want gate || want browser || want extract || want crawl || want jobshare; then
	if [[ ! -x $TRAWL ]]; then
		log "bin/trawl missing: make build"
		make build
	fi
	[[ -x $TRAWL ]] || die "$TRAWL not found"
fi
LG=$WORK/bin/loadgen
# The region key of every trawl cell and trawl dev of this run; bench/loadgen
# and bench/browser sign with it when it is in their environment.
REGION_KEYS=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')

if want_corpus; then
	# Pages of the corpus, sorted so every run and both sides see the same order.
	find "$CORPUS" -name '*.html' -type f | LC_ALL=C sort >"$WORK/pages.txt"
	NPAGES=$(wc -l <"$WORK/pages.txt")
	((NPAGES > 0)) || die "no .html pages under $CORPUS"

	log "file server on the corpus"
	start fileserver "$WORK/bin/fileserver" -root "$CORPUS" -addr 127.0.0.1:0 -addr-file "$WORK/fileserver.addr"
	FS_PID=$LAST_PID
	wait_until "file server" 20 "$FS_PID" test -s "$WORK/fileserver.addr"
	FS=http://$(cat "$WORK/fileserver.addr")
	FIRST_PATH=$(head -n1 "$WORK/pages.txt"); FIRST_PATH=${FIRST_PATH#"$CORPUS"}
	wait_until "file server" 20 "$FS_PID" curl -fsS -o /dev/null "$FS$FIRST_PATH"

	# Relative paths (/x.html) and the Nth page's URL.
	sed "s|^$CORPUS||" "$WORK/pages.txt" >"$WORK/paths.txt"
fi

# start_cell NAME [FLAGS...]: a fresh trawl cell on a free port with its own
# data dir and the run's region key; sets CELL (base URL) and CELL_PID.
# Ready = GET /health (open, unsigned) is 200. Its clients must sign: run
# them with TRAWL_REGION_KEYS="$REGION_KEYS" (bench/loadgen, bench/browser).
start_cell() {
	local name=$1 port; shift
	port=$("$LG" freeport)
	mkdir -p "$WORK/$name-data"
	start "$name" env TRAWL_REGION_KEYS="$REGION_KEYS" "$TRAWL" cell --listen "127.0.0.1:$port" --data "$WORK/$name-data" --allow-private-networks "$@"
	CELL_PID=$LAST_PID
	CELL=http://127.0.0.1:$port
	wait_until "trawl cell ($name)" 60 "$CELL_PID" curl -fsS --max-time 2 -o /dev/null "$CELL/health"
}

# start_front NAME [FLAGS...]: a fresh cell behind bench/cellfront (the flag
# defaults of `trawl cell --allow-private-networks`; each request signed on
# arrival in the cell's process, no hop) on a free port with its own data
# dir; sets CELL and CELL_PID. Its clients send unsigned requests (wrk, curl).
start_front() {
	local name=$1; shift
	mkdir -p "$WORK/$name-data"
	start "$name" env -u TRAWL_REGION_KEYS "$WORK/bin/cellfront" -listen 127.0.0.1:0 -addr-file "$WORK/$name.addr" -data "$WORK/$name-data" "$@"
	CELL_PID=$LAST_PID
	wait_until "bench/cellfront ($name)" 60 "$CELL_PID" test -s "$WORK/$name.addr"
	CELL=http://$(cat "$WORK/$name.addr")
	wait_until "bench/cellfront ($name)" 60 "$CELL_PID" curl -fsS --max-time 2 -o /dev/null "$CELL/health"
}

vmhwm_mb() { awk '/^VmHWM:/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

# wrk_json NAME ARGS...: run wrk, keep its text report in the log, return the JSON line.
wrk_json() {
	local name=$1; shift
	wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"$WRK_DURATION" --latency "$@" >"$WORK/$name.wrk" 2>&1 ||
		{ cat "$WORK/$name.wrk" >&2; die "wrk $name failed"; }
	sed -n 's/^WRK_JSON //p' "$WORK/$name.wrk"
}

declare -A R # results, filled by the parts below

# ------------------------------------------------ 1. content pipeline

if want pipeline; then
	log "1/3 content pipeline on $NPAGES pages: trawl (Go)"
	"$WORK/bin/pipeline" -list "$WORK/pages.txt" -root "$CORPUS" -base "$FS/" -warmup "$PIPELINE_WARMUP" >"$WORK/pipeline-go.json"
	cat "$WORK/pipeline-go.json" >&2
	log "1/3 content pipeline on $NPAGES pages: JSDOM + Readability + Turndown(+GFM)"
	node "$BENCH/js/pipeline.js" --list "$WORK/pages.txt" --root "$CORPUS" --base "$FS/" --warmup "$PIPELINE_WARMUP" >"$WORK/pipeline-js.json"
	cat "$WORK/pipeline-js.json" >&2
	R[pipe_go]=$(jq -r .ms_per_page "$WORK/pipeline-go.json")
	R[pipe_js]=$(jq -r .ms_per_page "$WORK/pipeline-js.json")
	R[pipe_go_cpu]=$(jq -r .cpu_ms_per_page "$WORK/pipeline-go.json")
	R[pipe_js_cpu]=$(jq -r .cpu_ms_per_page "$WORK/pipeline-js.json")
	R[pipe_go_p99]=$(jq -r .p99 "$WORK/pipeline-go.json")
	R[pipe_js_p99]=$(jq -r .p99 "$WORK/pipeline-js.json")
	R[pipe_go_bad]=$(jq -r '.errors + .empty' "$WORK/pipeline-go.json")
	R[pipe_js_bad]=$(jq -r .empty "$WORK/pipeline-js.json")
fi

# ------------------------------------------------ 1b. articles

if want articles; then
	mkdir -p "$WORK/aeb"
	for f in "$AEB"/html/*.html.gz; do
		b=$(basename "$f" .gz)
		gzip -dc "$f" >"$WORK/aeb/$b"
	done
	find "$WORK/aeb" -name '*.html' -type f | LC_ALL=C sort >"$WORK/aeb-pages.txt"
	NAEB=$(wc -l <"$WORK/aeb-pages.txt")
	AEB_WARMUP=$((PIPELINE_WARMUP < NAEB ? PIPELINE_WARMUP : NAEB / 2))
	log "1b articles: content pipeline on $NAEB article pages: trawl (Go)"
	"$WORK/bin/pipeline" -list "$WORK/aeb-pages.txt" -root "$WORK/aeb" -base "http://127.0.0.1/aeb/" -warmup "$AEB_WARMUP" >"$WORK/aeb-go.json"
	cat "$WORK/aeb-go.json" >&2
	log "1b articles: content pipeline on $NAEB article pages: JSDOM + Readability + Turndown(+GFM)"
	node "$BENCH/js/pipeline.js" --list "$WORK/aeb-pages.txt" --root "$WORK/aeb" --base "http://127.0.0.1/aeb/" --warmup "$AEB_WARMUP" >"$WORK/aeb-js.json"
	cat "$WORK/aeb-js.json" >&2
	R[aeb_go]=$(jq -r .ms_per_page "$WORK/aeb-go.json")
	R[aeb_js]=$(jq -r .ms_per_page "$WORK/aeb-js.json")
	R[aeb_go_cpu]=$(jq -r .cpu_ms_per_page "$WORK/aeb-go.json")
	R[aeb_js_cpu]=$(jq -r .cpu_ms_per_page "$WORK/aeb-js.json")
	log "1b articles: F1 with the benchmark's metric (bench/aeb)"
	"$WORK/bin/aeb" -data "$AEB" >"$WORK/aeb-f1.txt"
	cat "$WORK/aeb-f1.txt" >&2
	f1() { awk -v s="$1" -v e="$2" '$1 == s && $2 == e { print $4 }' "$WORK/aeb-f1.txt"; }
	R[aeb_f1]=$(f1 all trawl); R[aeb_f1_traf]=$(f1 all go-trafilatura); R[aeb_f1_read]=$(f1 all go-readability)
	R[aeb_f1_held]=$(f1 held-out trawl); R[aeb_f1_held_traf]=$(f1 held-out go-trafilatura)
fi

# ------------------------------------------------ 2. /scrape cache hits

if want scrape; then
	head -n "$SCRAPE_URLS" "$WORK/paths.txt" >"$WORK/scrape-paths.txt"
	sed "s|^|$FS|" "$WORK/scrape-paths.txt" >"$WORK/scrape-urls.txt"
	jq -Rc '{url: ., format: "md"}' "$WORK/scrape-urls.txt" >"$WORK/scrape-bodies.txt"
	n=$(wc -l <"$WORK/scrape-urls.txt")

	log "2/3 /scrape cache hits: start a cell behind bench/cellfront (signs on arrival, no hop), warm the cache with $n URLs"
	start_front cell-scrape -browsers 0
	"$LG" warm -api "$CELL" -urls "$WORK/scrape-urls.txt" -c 8 -format md

	log "2/3 baseline: wrk GET on the file server, same $n paths"
	R[fs_wrk]=$(wrk_json fileserver -s "$BENCH/wrk/get.lua" "$FS" -- "$WORK/scrape-paths.txt")
	echo "${R[fs_wrk]}" >&2
	log "2/3 trawl: wrk POST /scrape over the same $n URLs"
	R[sc_wrk]=$(wrk_json scrape -s "$BENCH/wrk/scrape.lua" "$CELL" -- "$WORK/scrape-bodies.txt")
	echo "${R[sc_wrk]}" >&2
	grep -h 'scrape.lua:' "$WORK/scrape.wrk" >&2 || true
	for k in fileserver:fs_wrk scrape:sc_wrk; do
		errs=$(jq '.errors | add' <<<"${R[${k#*:}]}")
		((errs == 0)) || { cat "$WORK/${k%%:*}.wrk" >&2; die "wrk ${k%%:*} saw $errs errors"; }
	done
	R[sc_rss]=$(vmhwm_mb "$CELL_PID")
	stop "$CELL_PID"
fi

# ------------------------------------------------ 3. 10,000-URL job

if want job; then
	# Distinct URLs cycling through the corpus; the file server ignores ?v=N,
	# the cell sees a new URL each time, so every one is a real fetch.
	awk -v n="$JOB_URLS" -v fs="$FS" '{p[NR-1]=$0} END {for (i=0; i<n; i++) printf "%s%s?v=%d\n", fs, p[i%NR], i}' \
		"$WORK/paths.txt" >"$WORK/job-urls.txt"

	log "3/3 baseline: raw GET of the $JOB_URLS URLs, concurrency $JOB_CONCURRENCY"
	"$LG" fetch -urls "$WORK/job-urls.txt" -c "$JOB_CONCURRENCY" >"$WORK/fetch.json"
	cat "$WORK/fetch.json" >&2
	[[ $(jq .errors "$WORK/fetch.json") == 0 ]] || die "raw fetch baseline saw errors"

	log "3/3 trawl: one job of $JOB_URLS URLs on a fresh cell"
	start_cell cell-job --job-concurrency "$JOB_CONCURRENCY" --browsers 0
	TRAWL_REGION_KEYS="$REGION_KEYS" "$LG" job -api "$CELL" -urls "$WORK/job-urls.txt" -pid "$CELL_PID" -format md -timeout "$JOB_TIMEOUT" >"$WORK/job.json"
	cat "$WORK/job.json" >&2
	stop "$CELL_PID"
fi

# ------------------------------------------------ 4. ledger

if want ledger; then
	# Both run in this process tree, on loopback only, data in $WORK; each
	# prints one JSON line (progress on stderr). See bench/README.md.
	log "4/4 ledger: durable charges/s, ledger.Client on a one-voter Raft ledger vs a synced Pebble write per charge (callers $LEDGER_CALLERS)"
	lflags=(-dir "$WORK/ledger-throughput" -callers "$LEDGER_CALLERS" -duration "$LEDGER_DURATION")
	[[ $LEDGER_DIAGNOSE == 1 ]] && lflags+=(-diagnose)
	[[ -n $LEDGER_PROFILE ]] && lflags+=(-cpuprofile "$LEDGER_PROFILE")
	"$WORK/bin/ledger" throughput "${lflags[@]}" >"$WORK/ledger-throughput.json"
	cat "$WORK/ledger-throughput.json" >&2
	log "4/4 ledger: charge latency with $LEDGER_DELAY (one way) to the leader: ledger.Client vs a Settle through Raft per charge"
	"$WORK/bin/ledger" latency -dir "$WORK/ledger-latency" -delay "$LEDGER_DELAY" >"$WORK/ledger-latency.json"
	cat "$WORK/ledger-latency.json" >&2
	rm -rf "$WORK/ledger-throughput" "$WORK/ledger-latency"
fi

# ------------------------------------------------ 5. gate overhead

if want gate; then
	# The same corpus setup as part 2: pages off the file server, scraped once
	# through the cell so every timed request is a cache hit (cost 0.000, but
	# through the gate it still passes auth, the rate limit, the meter's hold
	# check and its charge path with a usage line, route and the proxy).
	head -n "$GATE_URLS" "$WORK/paths.txt" | sed "s|^|$FS|" >"$WORK/gate-urls.txt"
	jq -Rc '{url: ., format: "md"}' "$WORK/gate-urls.txt" >"$WORK/gate-bodies.txt"
	n=$(wc -l <"$WORK/gate-urls.txt")
	R[gate_load_start]=$(cut -d' ' -f1-3 /proc/loadavg)
	# A copy of the binary: a rebuild of bin/trawl during the run changes
	# nothing, and a profile can still read its symbols.
	cp "$TRAWL" "$WORK/bin/trawl-gate"
	# The launch table with the plans' limits off (0 = no limit) and a large
	# sign-up grant, so neither the rate limit nor the balance interferes.
	cat >"$WORK/gate-prices.json" <<-'EOF'
	{
	  "grants": {"signup": "1000000000.000"},
	  "plans": {
	    "free": {"rate_per_minute": 0, "concurrency": 0, "keys": 2, "monthly_cap": "0.000"},
	    "supporter": {"rate_per_minute": 0, "concurrency": 0, "keys": 10, "monthly_cap": "0.000"}
	  }
	}
	EOF
	GATE_KEY=trawl_dev_$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
	gport=$("$LG" freeport); cport=$("$LG" freeport); rport=$("$LG" freeport); pport=$("$LG" freeport)
	qport=$("$LG" freeport); qcport=$("$LG" freeport)
	mkdir -p "$WORK/gate-data"

	log "5/5 gate: trawl dev (gate + cell + one-voter ledger), cell on 127.0.0.1:$cport"
	# Tracing off (the default) whatever the caller's environment says.
	start gate-dev env -u OTEL_TRACES_EXPORTER -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT \
		TRAWL_DEV_KEY="$GATE_KEY" TRAWL_REGION_KEYS="$REGION_KEYS" "$WORK/bin/trawl-gate" dev --listen "127.0.0.1:$gport" --cell-listen "127.0.0.1:$cport" \
		--ledger-raft "127.0.0.1:$rport" --data "$WORK/gate-data" --prices "$WORK/gate-prices.json" --allow-private-networks --browsers 0
	DEV_PID=$LAST_PID
	wait_until "trawl dev" 90 "$DEV_PID" grep -q '"msg":"gate serving"' "$WORK/gate-dev.log"
	GATE=http://127.0.0.1:$gport
	DEVCELL=http://$(grep -m1 '"msg":"gate serving"' "$WORK/gate-dev.log" | jq -r .cell)
	wait_until "trawl dev (gate)" 30 "$DEV_PID" curl -fsS --max-time 2 -o /dev/null -H "Authorization: Bearer $GATE_KEY" "$GATE/v1/billing/balance"
	wait_until "trawl dev (cell)" 30 "$DEV_PID" curl -fsS --max-time 2 -o /dev/null "$DEVCELL/health"
	plan=$(curl -fsS "$GATE/v1/prices" | jq -c '.plans.free | {rate_per_minute, concurrency}')
	[[ $plan == '{"rate_per_minute":0,"concurrency":0}' ]] || die "the gate did not take the bench price table (free plan: $plan)"

	# "Direct": a cell of the same code and defaults in its own process,
	# behind bench/cellfront (each request signed on arrival, then checked by
	# the cell, no hop): wrk cannot sign, and trawl dev's cell answers only
	# its gate. Its client in production is the gate, which signs.
	log "5/5 gate: direct, a cell behind bench/cellfront"
	start_front gate-direct -browsers 0
	DIRECT=$CELL DIRECT_PID=$CELL_PID
	log "5/5 gate: plain Caddy reverse_proxy (bench/caddyplain) on 127.0.0.1:$pport -> $DIRECT"
	start caddyplain "$WORK/bin/caddyplain" -listen "127.0.0.1:$pport" -upstream "${DIRECT#http://}" -storage "$WORK/caddyplain-storage"
	PLAIN_PID=$LAST_PID
	PLAIN=http://127.0.0.1:$pport
	wait_until "caddyplain" 30 "$PLAIN_PID" curl -fsS --max-time 2 -o /dev/null "$PLAIN/health"
	# The same plain Caddy with a cell of its own in its process: the shape
	# of trawl dev (proxy and cell in one Go runtime), without our modules.
	log "5/5 gate: plain Caddy + a cell in one process (bench/caddyplain -cell-listen) on 127.0.0.1:$qport -> 127.0.0.1:$qcport"
	start plaincell "$WORK/bin/caddyplain" -listen "127.0.0.1:$qport" -cell-listen "127.0.0.1:$qcport" -cell-data "$WORK/plaincell-data" -storage "$WORK/caddyplain-storage"
	PC_PID=$LAST_PID
	PLAINCELL=http://127.0.0.1:$qport
	wait_until "caddyplain -cell-listen" 30 "$PC_PID" curl -fsS --max-time 2 -o /dev/null "$PLAINCELL/health"

	log "5/5 gate: warm the cells' caches with $n URLs"
	# trawl dev's cell with signed requests (the run's region key, which dev
	# was given); the fronted cells sign on arrival.
	TRAWL_REGION_KEYS="$REGION_KEYS" "$LG" warm -api "$DEVCELL" -urls "$WORK/gate-urls.txt" -c 8 -format md
	"$LG" warm -api "$DIRECT" -urls "$WORK/gate-urls.txt" -c 8 -format md
	"$LG" warm -api "http://127.0.0.1:$qcport" -urls "$WORK/gate-urls.txt" -c 8 -format md

	# Spot checks: each side answers 200 from the cache; the gate's answer
	# carries the receipt headers (a cache hit costs 0.000).
	body=$(head -n1 "$WORK/gate-bodies.txt")
	for side in direct:$DIRECT plain:$PLAIN plaincell:$PLAINCELL gate:$GATE; do
		curl -sS -o "$WORK/gate-spot-${side%%:*}.json" -D "$WORK/gate-spot-${side%%:*}.headers" \
			-H "Authorization: Bearer $GATE_KEY" -H 'Content-Type: application/json' -d "$body" "${side#*:}/scrape"
		awk 'NR == 1 { exit !/ 200/ }' "$WORK/gate-spot-${side%%:*}.headers" || { cat "$WORK/gate-spot-${side%%:*}.headers" >&2; die "${side%%:*}: /scrape did not answer 200"; }
	done
	for side in direct plain plaincell; do
		grep -qi '^trawl-usage:.*"cache":"hit"' "$WORK/gate-spot-$side.headers" || { cat "$WORK/gate-spot-$side.headers" >&2; die "$side: the cell's answer is not a cache hit"; }
	done
	# The gate's own cell (it drops the usage header): a signed request for
	# the same URL must be a cache hit there too.
	head -n1 "$WORK/gate-urls.txt" >"$WORK/gate-spot-url.txt"
	TRAWL_REGION_KEYS="$REGION_KEYS" "$LG" warm -api "$DEVCELL" -urls "$WORK/gate-spot-url.txt" -c 1 -format md -expect-hit ||
		die "trawl dev's cell: the spot check's answer is not a cache hit"
	R[gate_cost]=$(awk -F': *' 'tolower($1) == "x-svc-cost" {gsub(/\r/, "", $2); print $2}' "$WORK/gate-spot-gate.headers")
	[[ -n ${R[gate_cost]} ]] || { cat "$WORK/gate-spot-gate.headers" >&2; die "the gate's answer has no x-svc-cost"; }
	grep -qi '^x-svc-receipt:' "$WORK/gate-spot-gate.headers" || die "the gate's answer has no x-svc-receipt"
	! grep -qi '^trawl-usage:' "$WORK/gate-spot-gate.headers" || die "the gate passed the cell's usage header on"
	echo "gate spot check: 200, x-svc-cost ${R[gate_cost]}, $(grep -i '^x-svc-balance:' "$WORK/gate-spot-gate.headers" | tr -d '\r')" >&2
	# What the account spent this month: cache hits must leave it unchanged
	# (the balance itself may move: the monthly grant lands after start-up).
	spent0=$(curl -fsS -H "Authorization: Bearer $GATE_KEY" "$GATE/v1/billing/balance" | jq -r .month_spent)

	TCK=$(getconf CLK_TCK)
	ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # user+system, all threads, in clock ticks
	declare -A URL_OF=([direct]=$DIRECT [plain]=$PLAIN [plaincell]=$PLAINCELL [gate]=$GATE)
	# gate_run SIDE LOAD ROUND THREADS CONNS DURATION: one wrk run; appends a
	# JSON line (wrk's figures + CPU per request of the trawl dev process, of
	# caddyplain, of caddyplain -cell-listen and of the direct cell's
	# cellfront) to gate-runs.jsonl. Fails on any error or non-2xx answer.
	gate_run() {
		local side=$1 load=$2 round=$3 t=$4 c=$5 d=$6 name="gate-$2-$1-r$3" out t0 p0 q0 f0 t1 p1 q1 f1 errs
		t0=$(ticks "$DEV_PID"); p0=$(ticks "$PLAIN_PID"); q0=$(ticks "$PC_PID"); f0=$(ticks "$DIRECT_PID")
		wrk -t"$t" -c"$c" -d"$d" --latency -s "$BENCH/wrk/scrape.lua" "${URL_OF[$side]}" -- "$WORK/gate-bodies.txt" "$GATE_KEY" >"$WORK/$name.wrk" 2>&1 ||
			{ cat "$WORK/$name.wrk" >&2; die "wrk $name failed"; }
		t1=$(ticks "$DEV_PID"); p1=$(ticks "$PLAIN_PID"); q1=$(ticks "$PC_PID"); f1=$(ticks "$DIRECT_PID")
		out=$(sed -n 's/^WRK_JSON //p' "$WORK/$name.wrk")
		[[ -n $out ]] || { cat "$WORK/$name.wrk" >&2; die "wrk $name: no report"; }
		errs=$(jq '(.errors | add) + (if .requests > 0 then 0 else 1 end)' <<<"$out")
		((errs == 0)) || { cat "$WORK/$name.wrk" >&2; die "wrk $name saw $errs errors or non-2xx answers"; }
		jq -c --arg side "$side" --arg load "$load" --argjson round "$round" --argjson tck "$TCK" \
			--argjson dt "$((t1 - t0))" --argjson dp "$((p1 - p0))" --argjson dq "$((q1 - q0))" --argjson df "$((f1 - f0))" \
			'. + {side: $side, load: $load, round: $round,
			      cpu_trawl_us: ($dt * 1e6 / $tck / .requests), cpu_plain_us: ($dp * 1e6 / $tck / .requests),
			      cpu_plaincell_us: ($dq * 1e6 / $tck / .requests), cpu_front_us: ($df * 1e6 / $tck / .requests),
			      cpu_us: (($dt + $dp + $dq + $df) * 1e6 / $tck / .requests)}' <<<"$out" | tee -a "$WORK/gate-runs.jsonl" >&2
	}

	log "5/5 gate: warm-up, 2 s per side"
	for side in direct plain plaincell gate; do gate_run "$side" warmup 0 "$WRK_THREADS" "$WRK_CONNS" 2s; done
	sides=(direct plain plaincell gate)
	for ((r = 1; r <= GATE_ROUNDS; r++)); do
		# Interleaved, and the order rotates each round so no side always
		# runs right after the same neighbour.
		order=("${sides[@]:$(((r - 1) % 4))}" "${sides[@]:0:$(((r - 1) % 4))}")
		log "5/5 gate: round $r/$GATE_ROUNDS under load (wrk -t$WRK_THREADS -c$WRK_CONNS -d$GATE_DURATION): ${order[*]}"
		for side in "${order[@]}"; do gate_run "$side" load "$r" "$WRK_THREADS" "$WRK_CONNS" "$GATE_DURATION"; done
		log "5/5 gate: round $r/$GATE_ROUNDS at low load (wrk -t1 -c1 -d$GATE_LOW_DURATION): ${order[*]}"
		for side in "${order[@]}"; do gate_run "$side" low "$r" 1 1 "$GATE_LOW_DURATION"; done
	done

	if [[ -n $GATE_PERF ]]; then
		command -v perf >/dev/null || die "BENCH_GATE_PERF needs perf (linux-perf)"
		log "5/5 gate: perf profile of the trawl process during one more gate run -> $GATE_PERF"
		wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"$GATE_DURATION" -s "$BENCH/wrk/scrape.lua" "$GATE" -- "$WORK/gate-bodies.txt" "$GATE_KEY" >"$WORK/gate-perf.wrk" 2>&1 &
		wpid=$!
		sleep 1
		secs=${GATE_DURATION%s}; [[ $secs =~ ^[0-9]+$ ]] || secs=8
		perf record -q -F 999 -g -p "$DEV_PID" -o "$GATE_PERF" -- sleep "$((secs > 3 ? secs - 2 : 1))" >/dev/null 2>&1 || die "perf record failed"
		wait "$wpid" || true
		perf report -i "$GATE_PERF" --no-children --sort sym --stdio -g none >"$WORK/gate-perf-self.txt" 2>/dev/null || true
		perf report -i "$GATE_PERF" --children --sort sym --stdio -g none >"$WORK/gate-perf-children.txt" 2>/dev/null || true
		{
			echo "# perf report --no-children --sort sym (self time), trawl dev under the gate load"
			awk '!/^#/ && NF { print; if (++n == 60) exit }' "$WORK/gate-perf-self.txt"
			echo
			echo "# perf report --children --sort sym (inclusive time)"
			awk '!/^#/ && NF { print; if (++n == 150) exit }' "$WORK/gate-perf-children.txt"
		} >"$GATE_PERF.txt"
		echo "perf report: $GATE_PERF.txt" >&2
	fi

	spent1=$(curl -fsS -H "Authorization: Bearer $GATE_KEY" "$GATE/v1/billing/balance" | jq -r .month_spent)
	[[ $spent0 == "$spent1" ]] || echo "gate: month_spent moved from $spent0 to $spent1 during the cache-hit runs" >&2
	R[gate_spent]="$spent0 → $spent1"
	R[gate_load_end]=$(cut -d' ' -f1-3 /proc/loadavg)
	R[gate_n]=$n
	stop "$PC_PID"
	stop "$PLAIN_PID"
	stop "$DIRECT_PID"
	stop "$DEV_PID"

	# Medians over the rounds: of each side's figures, and of the per-round
	# ratios and differences (the sides of one round ran back to back).
	jq -s '
	  def med: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
	  def r3: . * 1000 | round / 1000;
	  [.[] | select(.load != "warmup")] as $runs
	  | ([$runs[].round] | unique) as $rounds
	  | def run(s; l; r): first($runs[] | select(.side == s and .load == l and .round == r));
	    def side(s; l): [$runs[] | select(.side == s and .load == l)] as $x
	      | {rps: ([$x[].rps] | med | . * 10 | round / 10), p50_ms: ([$x[].p50_ms] | med), p99_ms: ([$x[].p99_ms] | med),
	         cpu_us: ([$x[].cpu_us] | med | round), cpu_trawl_us: ([$x[].cpu_trawl_us] | med | round),
	         cpu_plain_us: ([$x[].cpu_plain_us] | med | round), cpu_plaincell_us: ([$x[].cpu_plaincell_us] | med | round),
	         cpu_front_us: ([$x[].cpu_front_us] | med | round)};
	    def per(l; f): [$rounds[] as $r | {g: run("gate"; l; $r), p: run("plain"; l; $r), q: run("plaincell"; l; $r), d: run("direct"; l; $r)} | f];
	    def rat: . * 1000 | round / 1000;
	  {rounds: ($rounds | length),
	   load: {direct: side("direct"; "load"), plain: side("plain"; "load"), plaincell: side("plaincell"; "load"), gate: side("gate"; "load")},
	   low: {direct: side("direct"; "low"), plain: side("plain"; "low"), plaincell: side("plaincell"; "low"), gate: side("gate"; "low")},
	   per_round: {
	     load_gate_direct: per("load"; .g.rps / .d.rps | rat),
	     load_gate_plain: per("load"; .g.rps / .p.rps | rat),
	     load_gate_plaincell: per("load"; .g.rps / .q.rps | rat),
	     load_plain_direct: per("load"; .p.rps / .d.rps | rat),
	     load_plaincell_direct: per("load"; .q.rps / .d.rps | rat),
	     load_gate_over_p50: per("load"; .g.p50_ms - .d.p50_ms | r3),
	     load_plain_over_p50: per("load"; .p.p50_ms - .d.p50_ms | r3),
	     load_plaincell_over_p50: per("load"; .q.p50_ms - .d.p50_ms | r3),
	     low_gate_over_p50: per("low"; .g.p50_ms - .d.p50_ms | r3),
	     low_plain_over_p50: per("low"; .p.p50_ms - .d.p50_ms | r3),
	     low_plaincell_over_p50: per("low"; .q.p50_ms - .d.p50_ms | r3),
	     low_gate_over_plaincell_p50: per("low"; .g.p50_ms - .q.p50_ms | r3),
	     low_gate_over_plain_p50: per("low"; .g.p50_ms - .p.p50_ms | r3),
	     load_cpu_gate_plaincell: per("load"; .g.cpu_us / .q.cpu_us | rat),
	     load_cpu_gate_direct: per("load"; .g.cpu_us / .d.cpu_us | rat)}}
	  | .median = (.per_round | map_values(med))
	' "$WORK/gate-runs.jsonl" >"$WORK/gate.json"
	cat "$WORK/gate.json" >&2
fi

# ------------------------------------------------ 6. browser engine (issue 5)

# A `trawl cell` with the default browser pool (one Chromium, 4 pages) and
# its cache off; corpus pages forced onto the browser with a browser field
# (wait_for), so the ladder sends them straight there. Baselines in the same
# run: the same pages through the same cell's plain HTTP engine, and bare
# Chromium driven by playwright-go without the pool (bench/browser).
if want browser; then
	BROWSER_PAGES=${BENCH_BROWSER_PAGES:-1000}   # pages of the throughput run (PSS after 10 and after these)
	BROWSER_BURST=${BENCH_BROWSER_BURST:-100}    # requests of each burst
	BROWSER_LEVELS=${BENCH_BROWSER_LEVELS:-10,50,100}
	((BROWSER_PAGES <= NPAGES)) || die "BENCH_BROWSER_PAGES=$BROWSER_PAGES is more than the corpus's $NPAGES pages"
	head -n "$BROWSER_PAGES" "$WORK/paths.txt" | sed "s|^|$FS|" >"$WORK/browser-urls.txt"
	R[br_load_start]=$(cut -d' ' -f1-3 /proc/loadavg)
	log "6/6 browser: a cell with the default browser pool, cache off"
	start_cell cell-browser --fresh-for -1s --browsers 1
	log "6/6 browser: $BROWSER_PAGES pages, then bursts of $BROWSER_BURST at $BROWSER_LEVELS concurrent, then the baselines"
	TRAWL_REGION_KEYS="$REGION_KEYS" "$WORK/bin/browser" -api "$CELL" -urls "$WORK/browser-urls.txt" -pages "$BROWSER_PAGES" -burst "$BROWSER_BURST" -levels "$BROWSER_LEVELS" >"$WORK/browser.json" ||
		{ tail -n 30 "$WORK/cell-browser.log" >&2; die "bench/browser failed"; }
	cat "$WORK/browser.json" >&2
	R[br_health]=$(curl -fsS "$CELL/health" | jq -c .browser)
	stop "$CELL_PID"
	R[br_load_end]=$(cut -d' ' -f1-3 /proc/loadavg)
fi

# The price table of the trawl dev parts: no rate or concurrency limit, a
# large grant, so the figures are the calls'.
bench_prices() {
	cat >"$WORK/dev-prices.json" <<-'EOF'
	{
	  "grants": {"signup": "1000000000.000"},
	  "plans": {
	    "free": {"rate_per_minute": 0, "concurrency": 0, "keys": 2, "monthly_cap": "0.000"},
	    "supporter": {"rate_per_minute": 0, "concurrency": 0, "keys": 10, "monthly_cap": "0.000"}
	  }
	}
	EOF
}
DEV_KEY=trawl_dev_$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')

# start_dev NAME: a fresh trawl dev (gate + cell + one-voter ledger) on
# free ports, with its own data and the bench price table, the key
# $DEV_KEY; its log is $WORK/NAME.log. Sets DEV_GATE (base URL) and DEV_PID.
start_dev() {
	local port cport rport
	port=$("$LG" freeport); cport=$("$LG" freeport); rport=$("$LG" freeport)
	[[ -s $WORK/dev-prices.json ]] || bench_prices
	mkdir -p "$WORK/$1-data"
	cp -n "$TRAWL" "$WORK/bin/trawl-dev"
	start "$1" env -u OTEL_TRACES_EXPORTER -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT \
		TRAWL_DEV_KEY="$DEV_KEY" TRAWL_REGION_KEYS="$REGION_KEYS" "$WORK/bin/trawl-dev" dev --listen "127.0.0.1:$port" --cell-listen "127.0.0.1:$cport" \
		--ledger-raft "127.0.0.1:$rport" --data "$WORK/$1-data" --prices "$WORK/dev-prices.json" --allow-private-networks --browsers 0
	DEV_PID=$LAST_PID
	wait_until "trawl dev ($1)" 90 "$DEV_PID" grep -q '"msg":"gate serving"' "$WORK/$1.log"
	DEV_GATE=http://127.0.0.1:$port
	wait_until "trawl dev ($1, gate)" 30 "$DEV_PID" curl -fsS --max-time 2 -o /dev/null -H "Authorization: Bearer $DEV_KEY" "$DEV_GATE/v1/billing/balance"
}

if want extract; then
	EXTRACT_PAGES=${BENCH_EXTRACT_PAGES:-50}
	EXTRACT_ROUNDS=${BENCH_EXTRACT_ROUNDS:-5}
	log "7/7 extract: trawl dev (gate + cell + one-voter ledger), $EXTRACT_PAGES pages x $EXTRACT_ROUNDS rounds"
	start_dev extract-dev
	head -n "$EXTRACT_PAGES" "$WORK/paths.txt" | sed "s|^|$FS|" >"$WORK/extract-urls.txt"
	R[x_load_start]=$(cut -d' ' -f1-3 /proc/loadavg)
	"$WORK/bin/extract" -gate "$DEV_GATE" -key "$DEV_KEY" -urls "$WORK/extract-urls.txt" -pages "$EXTRACT_PAGES" -rounds "$EXTRACT_ROUNDS" >"$WORK/extract.json" ||
		{ tail -n 30 "$WORK/extract-dev.log" >&2; die "bench/extract failed"; }
	cat "$WORK/extract.json" >&2
	R[x_load_end]=$(cut -d' ' -f1-3 /proc/loadavg)
	stop "$DEV_PID"
fi

if want crawl; then
	CRAWL_PAGES=${BENCH_CRAWL_PAGES:-1000}
	CRAWL_ROUNDS=${BENCH_CRAWL_ROUNDS:-3}
	log "crawl: POST /v2/crawl of up to $CRAWL_PAGES pages from $FS/index.html beside the same URLs as one batch scrape (a job), $CRAWL_ROUNDS rounds"
	R[c_load_start]=$(cut -d' ' -f1-3 /proc/loadavg)
	# Each side on a fresh trawl dev, so neither finds the other's pages in
	# its cache; the first side alternates by round (the first round
	# crawls first: the job takes the URLs the crawl scraped).
	crawl_side() {
		start_dev "crawl-$1-$2"
		if [[ $1 == crawl ]]; then
			"$WORK/bin/crawl" -gate "$DEV_GATE" -key "$DEV_KEY" -start "$FS/index.html" -limit "$CRAWL_PAGES" -urls-out "$WORK/crawl-urls.txt"
		else
			"$WORK/bin/crawl" -gate "$DEV_GATE" -key "$DEV_KEY" -urls "$WORK/crawl-urls.txt"
		fi >"$WORK/crawl-$1-$2.json" || { tail -n 30 "$WORK/crawl-$1-$2.log" >&2; die "bench/crawl ($1) failed"; }
		stop "$DEV_PID"
		jq -c --argjson round "$2" '. + {round: $round}' "$WORK/crawl-$1-$2.json" >>"$WORK/crawl-rounds.jsonl"
	}
	: >"$WORK/crawl-rounds.jsonl"
	for ((r = 1; r <= CRAWL_ROUNDS; r++)); do
		if ((r % 2)); then crawl_side crawl "$r"; crawl_side job "$r"; else crawl_side job "$r"; crawl_side crawl "$r"; fi
	done
	cat "$WORK/crawl-rounds.jsonl" >&2
	R[c_load_end]=$(cut -d' ' -f1-3 /proc/loadavg)
fi

if want search; then
	SEARCH_CORPORA=${BENCH_SEARCH_CORPORA:-/usr/share/doc/postgresql-doc-15/html:/usr/share/doc/python3.11/html}
	SEARCH_PAGES=${BENCH_SEARCH_PAGES:-10000}
	log "8/8 search: $SEARCH_PAGES pages of $SEARCH_CORPORA through the gate, beside SQLite FTS5 (regiontest TestSearchSpeed)"
	R[s_load_start]=$(cut -d' ' -f1-3 /proc/loadavg)
	TRAWL_SEARCH_SPEED="$SEARCH_CORPORA" TRAWL_SEARCH_PAGES="$SEARCH_PAGES" TRAWL_SEARCH_SPEED_OUT="$WORK/search.json" \
		go test ./regiontest -run '^TestSearchSpeed$' -count=1 -v -timeout 60m >"$WORK/search.log" 2>&1 ||
		{ grep -E 'search_bench|FAIL|panic' "$WORK/search.log" | tail -n 20 >&2; die "search speed test failed"; }
	grep -E 'search_bench' "$WORK/search.log" >&2 || true
	R[s_load_end]=$(cut -d' ' -f1-3 /proc/loadavg)
fi

if want searchq; then
	SEARCHQ_CORPORA=${BENCH_SEARCHQ_CORPORA:-python:/usr/share/doc/python3.11/html,sqlalchemy:/usr/share/doc/python-sqlalchemy-doc/html,celery:/usr/share/doc/python-celery-doc/html}
	log "8b search quality: known-item queries through the gate on $SEARCHQ_CORPORA, beside SQLite FTS5 (regiontest TestSearchQuality)"
	R[sq_load_start]=$(cut -d' ' -f1-3 /proc/loadavg)
	TRAWL_SEARCH_QUALITY="$SEARCHQ_CORPORA" TRAWL_SEARCH_QUALITY_OUT="$WORK/searchq.json" \
		go test ./regiontest -run '^TestSearchQuality$' -count=1 -v -timeout 90m >"$WORK/searchq.log" 2>&1 ||
		{ grep -E 'search_quality|FAIL|panic' "$WORK/searchq.log" | tail -n 20 >&2; die "search quality test failed"; }
	grep -E 'search_quality' "$WORK/searchq.log" >&2 || true
	R[sq_load_end]=$(cut -d' ' -f1-3 /proc/loadavg)
fi

if want metaq; then
	log "8c metadata: headline, author, date of article pages without JSON-LD and meta, beside go-trafilatura (bench/metaeval)"
	R[mq_load_start]=$(cut -d' ' -f1-3 /proc/loadavg)
	go run ./bench/metaeval -json "$WORK/metaq.json" >"$WORK/metaq.log" 2>&1 ||
		{ tail -n 20 "$WORK/metaq.log" >&2; die "bench/metaeval failed"; }
	R[mq_load_end]=$(cut -d' ' -f1-3 /proc/loadavg)
fi

if want jobshare; then
	JOBSHARE_URLS=${BENCH_JOBSHARE_URLS:-10000}
	JOBSHARE_CONCURRENCY=${BENCH_JOBSHARE_CONCURRENCY:-16}
	log "9 jobshare: one job of $JOBSHARE_URLS URLs at 200 ms a page on three clustered cells vs one, --job-concurrency $JOBSHARE_CONCURRENCY (cmd/trawl TestJobsScaleAcrossCells)"
	R[js_load_start]=$(cut -d' ' -f1-3 /proc/loadavg)
	# The test writes its figures once every URL is in the results exactly
	# once, before it checks the ratio: a missed ratio is a row marked
	# fail, anything else (no JSON) an error.
	TRAWL_BIN="$TRAWL" TRAWL_JOBSHARE_URLS="$JOBSHARE_URLS" TRAWL_JOBSHARE_CONCURRENCY="$JOBSHARE_CONCURRENCY" TRAWL_JOBSHARE_OUT="$WORK/jobshare.json" \
		go test ./cmd/trawl -run '^TestJobsScaleAcrossCells$' -count=1 -v -timeout 60m >"$WORK/jobshare.log" 2>&1 ||
		[[ -s $WORK/jobshare.json ]] || { grep -E 'jobshare_e2e|FAIL|panic' "$WORK/jobshare.log" | tail -n 20 >&2; die "job sharing test failed"; }
	grep -E 'jobshare_e2e_test' "$WORK/jobshare.log" | cut -c1-400 >&2 || true
	R[js_load_end]=$(cut -d' ' -f1-3 /proc/loadavg)
fi

# ------------------------------------------------ table

# ratio A B: A/B to 2 decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b+0 == 0) print "n/a"; else printf "%.2f", a/b }'; }
# check EXPR: awk boolean -> pass/fail
check() { if awk "BEGIN { exit !($1) }"; then echo pass; else echo "**fail**"; fi; }

rows=()
if want pipeline; then
	x=$(ratio "${R[pipe_js]}" "${R[pipe_go]}")
	rows+=("| Content pipeline, ms/page (mean, $NPAGES pages) | ${R[pipe_go]} | ${R[pipe_js]} | ${x}x faster | ≥ 10x | $(check "$x >= 10") |")
	x=$(ratio "${R[pipe_js_cpu]}" "${R[pipe_go_cpu]}")
	rows+=("| Content pipeline, CPU ms/page (less sensitive to load) | ${R[pipe_go_cpu]} | ${R[pipe_js_cpu]} | ${x}x less | ≥ 10x | $(check "$x >= 10") |")
	rows+=("| Content pipeline, p99 ms/page | ${R[pipe_go_p99]} | ${R[pipe_js_p99]} | $(ratio "${R[pipe_js_p99]}" "${R[pipe_go_p99]}")x faster | — | — |")
	rows+=("| Content pipeline, pages with no Markdown (or error) | ${R[pipe_go_bad]} | ${R[pipe_js_bad]} | — | — | — |")
fi
if want articles; then
	x=$(ratio "${R[aeb_js]}" "${R[aeb_go]}")
	rows+=("| Content pipeline on $NAEB article pages, ms/page | ${R[aeb_go]} | ${R[aeb_js]} | ${x}x faster | ≥ 20x | $(check "$x >= 20") |")
	x=$(ratio "${R[aeb_js_cpu]}" "${R[aeb_go_cpu]}")
	rows+=("| Content pipeline on $NAEB article pages, CPU ms/page | ${R[aeb_go_cpu]} | ${R[aeb_js_cpu]} | ${x}x less | ≥ 20x | $(check "$x >= 20") |")
	rows+=("| Article F1, benchmark metric, all $NAEB pages (baseline: go-trafilatura; go-readability ${R[aeb_f1_read]}) | ${R[aeb_f1]} | ${R[aeb_f1_traf]} | $(awk -v a="${R[aeb_f1]}" -v b="${R[aeb_f1_traf]}" 'BEGIN{printf "%+.3f", a-b}') | ≥ go-trafilatura | $(check "${R[aeb_f1]} >= ${R[aeb_f1_traf]}") |")
	rows+=("| Article F1, held-out pages (ids 0-5, never tuned on) | ${R[aeb_f1_held]} | ${R[aeb_f1_held_traf]} | $(awk -v a="${R[aeb_f1_held]}" -v b="${R[aeb_f1_held_traf]}" 'BEGIN{printf "%+.3f", a-b}') | ≥ go-trafilatura | $(check "${R[aeb_f1_held]} >= ${R[aeb_f1_held_traf]}") |")
fi
if want scrape; then
	sc_rps=$(jq .rps <<<"${R[sc_wrk]}"); fs_rps=$(jq .rps <<<"${R[fs_wrk]}")
	sc_p99=$(jq .p99_ms <<<"${R[sc_wrk]}"); fs_p99=$(jq .p99_ms <<<"${R[fs_wrk]}")
	x=$(ratio "$sc_rps" "$fs_rps")
	rows+=("| \`/scrape\` cache hits, req/s ($SCRAPE_URLS URLs) | $sc_rps | $fs_rps | $(awk -v x="$x" 'BEGIN{printf "%.0f%%", x*100}') | ≥ 50% | $(check "$x >= 0.5") |")
	rows+=("| \`/scrape\` cache hits, p99 latency ms | $sc_p99 | $fs_p99 | $(ratio "$sc_p99" "$fs_p99")x | < 20 ms | $(check "$sc_p99 < 20") |")
	rows+=("| Cell peak RSS after the wrk run, MB | ${R[sc_rss]} | — | — | — | — |")
fi
if want job; then
	j_pps=$(jq .pages_per_s "$WORK/job.json"); f_pps=$(jq .pages_per_s "$WORK/fetch.json")
	j_rss=$(jq .vmhwm_mb "$WORK/job.json")
	j_ok=$(jq -r '"\(.done|floor) done, \(.error|floor) errors, status \(.status)"' "$WORK/job.json")
	x=$(ratio "$j_pps" "$f_pps")
	rows+=("| ${JOB_URLS}-URL job, pages/s ($j_ok) | $j_pps | $f_pps (raw GET, c=$JOB_CONCURRENCY) | $(awk -v x="$x" 'BEGIN{printf "%.0f%%", x*100}') | ≥ 300 pages/s | $(check "$j_pps >= 300") |")
	rows+=("| ${JOB_URLS}-URL job, cell CPU ms/page (fetch + pipeline + store) | $(jq .cpu_ms_per_page "$WORK/job.json") | — | — | — | — |")
	rows+=("| ${JOB_URLS}-URL job, peak RSS (VmHWM) MB | $j_rss | — | — | < 300 MB | $(check "$j_rss < 300") |")
fi

if want ledger; then
	LT=$WORK/ledger-throughput.json LL=$WORK/ledger-latency.json
	while read -r run; do
		c=$(jq .callers <<<"$run")
		t=$(jq .trawl.per_s <<<"$run"); b=$(jq .baseline.per_s <<<"$run")
		rows+=("| Ledger, $c callers: durable charges/s through \`ledger.Client\`, one-voter Raft ledger (${LEDGER_DURATION} window) | $t | $b (\`store.Set\` Sync per charge) | $(ratio "$t" "$b")x | ≥ 100,000/s | $(check "$t >= 100000") |")
		tc=$(jq .trawl.cpu_ms_per_1000 <<<"$run"); bc=$(jq .baseline.cpu_ms_per_1000 <<<"$run")
		rows+=("| Ledger, $c callers: CPU ms per 1,000 charges in the window | $tc | $bc | $(ratio "$tc" "$bc")x | — | — |")
		rows+=("| Ledger, $c callers: charges/s settled into the Raft ledger (backlog $(jq '.trawl.unsettled_at_end // 0' <<<"$run") at the window's end, settled in $(jq '.trawl.drain_s // 0' <<<"$run") s) | $(jq '.trawl.settled_per_s // 0' <<<"$run") | — | — | — | — |")
		tc=$(jq '.trawl.cpu_ms_per_1000_settled // 0' <<<"$run")
		sa=$(jq -r 'if .trawl.cpu_ms_per_1000_settle then "settling alone \(.trawl.cpu_ms_per_1000_settle) ms per 1,000" else "the ledger kept up, so the window covers both" end' <<<"$run")
		rows+=("| Ledger, $c callers: CPU ms per 1,000 charges with their settlement ($sa) | $tc | $bc | $(ratio "$tc" "$bc")x | — | — |")
		if [[ $(jq 'has("client_only")' <<<"$run") == true ]]; then
			t=$(jq .client_only.per_s <<<"$run")
			rows+=("| Ledger, $c callers, diagnosis: charges/s through \`ledger.Client\` over a null ledger (no Raft; $(jq .client_only.cpu_ms_per_1000 <<<"$run") CPU ms/1,000) | $t | $b | $(ratio "$t" "$b")x | — | — |")
		fi
	done < <(jq -c '.runs[]' "$LT")
	d=$(jq .delay_ms "$LL")
	t=$(jq .trawl.p50_ms "$LL"); b=$(jq .baseline.p50_ms "$LL")
	rows+=("| Ledger: p50 ms of a charge, Client ${d} ms (one way) from the leader ($(jq .trawl.n "$LL") at $(jq .rate "$LL")/s; baseline $(jq .baseline.n "$LL")) | $t | $b (a Settle through Raft per charge) | $(ratio "$b" "$t")x faster | < 1 ms (baseline ≳ $((2 * ${d%.*})) ms) | $(check "$t < 1 && $b >= 2 * $d") |")
	t=$(jq .trawl.p99_ms "$LL"); b=$(jq .baseline.p99_ms "$LL")
	rows+=("| Ledger: p99 ms of a charge, Client ${d} ms from the leader | $t | $b | $(ratio "$b" "$t")x faster | — | — |")
fi

if want gate; then
	G=$WORK/gate.json
	g() { jq -r "$1" "$G"; }
	pct() { awk -v x="$1" 'BEGIN { printf "%.0f%%", x * 100 }'; }
	sgn() { awk -v x="$1" 'BEGIN { printf "%+.3f", x }'; }
	gl=$(g .load.gate.rps) dl=$(g .load.direct.rps) pl=$(g .load.plain.rps) ql=$(g .load.plaincell.rps) nr=$(g .rounds)
	x=$(g .median.load_gate_direct)
	rows+=("| Gate: \`/scrape\` cache hits through the gate (\`trawl dev\`), req/s under load (wrk -t$WRK_THREADS -c$WRK_CONNS, median of $nr rounds) | $gl | $dl (a cell direct, bench/cellfront) | $(pct "$x") | ≥ 70% | $(check "$x >= 0.7") |")
	x=$(g .median.load_gate_plain)
	rows+=("| Gate: the same vs a plain Caddy \`reverse_proxy\` to that direct cell, in its own process (bench/caddyplain) | $gl | $pl (plain Caddy) | $(pct "$x") | ≥ 70% (modules < 30%) | $(check "$x >= 0.7") |")
	x=$(g .median.load_gate_plaincell)
	rows+=("| Gate: the same vs plain Caddy with a cell in its own process, the shape of \`trawl dev\` (bench/caddyplain -cell-listen) | $gl | $ql (plain Caddy + cell) | $(pct "$x") | ≥ 70% (modules < 30%) | $(check "$x >= 0.7") |")
	rows+=("| Gate, context: a plain Caddy hop alone vs the cell direct, req/s under load (own process / cell in its process) | $pl / $ql | $dl | $(pct "$(g .median.load_plain_direct)") / $(pct "$(g .median.load_plaincell_direct)") | — | — |")
	x=$(g .median.low_gate_over_p50)
	rows+=("| Gate overhead p50 at low load (wrk -t1 -c1, one request at a time): gate p50 − cell p50, ms | $(g .low.gate.p50_ms) | $(g .low.direct.p50_ms) (cell direct) | $(sgn "$x") ms | < 1 ms | $(check "$x < 1") |")
	rows+=("| Gate, context: plain Caddy overhead p50 at low load, own process / cell in its process, ms (gate − these: $(sgn "$(g .median.low_gate_over_plain_p50)") / $(sgn "$(g .median.low_gate_over_plaincell_p50)")) | $(g .low.plain.p50_ms) / $(g .low.plaincell.p50_ms) | $(g .low.direct.p50_ms) | $(sgn "$(g .median.low_plain_over_p50)") / $(sgn "$(g .median.low_plaincell_over_p50)") ms | — | — |")
	rows+=("| Gate p50 under load (c$WRK_CONNS: mostly queueing; the overhead target is judged at low load), ms | $(g .load.gate.p50_ms) | $(g .load.direct.p50_ms) direct / $(g .load.plain.p50_ms) plain / $(g .load.plaincell.p50_ms) plain+cell | $(sgn "$(g .median.load_gate_over_p50)") ms vs direct | — | — |")
	rows+=("| Gate p99 under load, ms | $(g .load.gate.p99_ms) | $(g .load.direct.p99_ms) direct / $(g .load.plain.p99_ms) plain / $(g .load.plaincell.p99_ms) plain+cell | $(ratio "$(g .load.gate.p99_ms)" "$(g .load.direct.p99_ms)")x direct | — | — |")
	rows+=("| Gate, req/s at low load (1 connection) | $(g .low.gate.rps) | $(g .low.direct.rps) direct / $(g .low.plain.rps) plain / $(g .low.plaincell.rps) plain+cell | $(pct "$(ratio "$(g .low.gate.rps)" "$(g .low.direct.rps)")") of direct | — | — |")
	rows+=("| Gate, server CPU µs per request under load (user+system, all threads; gate = gate+cell process; plain = Caddy + cellfront processes) | $(g .load.gate.cpu_us) | $(g .load.direct.cpu_us) direct / $(g .load.plain.cpu_plain_us) + $(g .load.plain.cpu_front_us) plain / $(g .load.plaincell.cpu_us) plain+cell | $(g .median.load_cpu_gate_plaincell)x plain+cell | — | — |")
fi

if want browser; then
	B=$WORK/browser.json
	bj() { jq -r "$1" "$B"; }
	n=$(bj .pages)
	bp=$(bj .browser.pages_per_s) hp=$(bj .http.pages_per_s) xp=$(bj '.bare.pages_per_s // 0')
	rows+=("| Browser engine: pages/s, $n corpus pages through \`/scrape\` (default pool: 1 Chromium × 4 pages; c=$(bj .concurrency); $(bj .browser.ok)/$(bj .browser.requests) ok) | $bp | $xp (bare Chromium, playwright-go) / $hp (same cell, plain HTTP) | $(ratio "$bp" "$xp")x bare / $(ratio "$bp" "$hp")x HTTP | — | — |")
	rows+=("| Browser engine: p50 / p99 ms per page | $(bj .browser.p50_ms) / $(bj .browser.p99_ms) | $(bj '.bare.p50_ms // "—"') / $(bj '.bare.p99_ms // "—"') bare; $(bj .http.p50_ms) / $(bj .http.p99_ms) HTTP | — | — | — |")
	g=$(bj .pss_mb_growth)
	rows+=("| Chromium memory (PSS of the browser trees), MB: after $n pages vs after 10 (peak during the part $(bj .pss_mb_peak)) | $(bj ".pss_mb_after_$n") | $(bj .pss_mb_after_10) | $(awk -v x="$g" 'BEGIN{printf "%+.1f MB", x}') | growth < 300 MB | $(check "$g < 300") |")
	while read -r run; do
		l=$(jq .level <<<"$run") s=$(jq .success_pct <<<"$run") p99=$(jq .p99_ms <<<"$run") bg=$(jq .pss_mb_growth <<<"$run")
		rows+=("| Burst: the same $(jq .requests <<<"$run") pages at $l concurrent: success % (503 fleet-busy answers seen and repeated after Retry-After: $(jq .fleet_busy_seen <<<"$run")) | $s | — | — | ≥ 99% | $(check "$s >= 99") |")
		rows+=("| Burst at $l concurrent: p50 / p99 ms (whole request, waits included) | $(jq .p50_ms <<<"$run") / $p99 | — | — | p99 ≤ 10 s | $(check "$p99 <= 10000") |")
		rows+=("| Burst at $l concurrent: Chromium PSS after, MB (growth over the 10-page figure) | $(jq .pss_mb_after <<<"$run") | $(bj .pss_mb_after_10) | $(awk -v x="$bg" 'BEGIN{printf "%+.1f MB", x}') | growth < 300 MB | $(check "$bg < 300") |")
	done < <(jq -c '.bursts[]' "$B")
fi

if want extract; then
	X=$WORK/extract.json
	xj() { jq -r "$1" "$X"; }
	xp=$(xj .extract.p50_ms) sp=$(xj .scrape.p50_ms)
	rows+=("| Extract: deterministic \`POST /extract\` of a cached page through the gate (\`trawl dev\`), p50 ms at one request at a time ($(xj .pages) pages × $(xj .rounds) rounds; title filled on $(xj .title_filled)) | $xp | $sp (\`POST /scrape\` of the same page, same gate, interleaved) | $(ratio "$xp" "$sp")x | p50 < 20 ms | $(check "$xp < 20") |")
	rows+=("| Extract: p99 ms | $(xj .extract.p99_ms) | $(xj .scrape.p99_ms) | $(ratio "$(xj .extract.p99_ms)" "$(xj .scrape.p99_ms)")x | — | — |")
	vp=$(xj .v2.p50_ms)
	rows+=("| Firecrawl compatibility: \`POST /v2/scrape\` (the SDKs' default: Markdown, maxAge 2 days; a cache hit of a page an earlier v2 call fetched) through the gate, p50 ms at one request at a time | $vp | $sp (\`POST /scrape\`, a cache hit of the same page, same gate, interleaved) | $(ratio "$vp" "$sp")x | p50 < 20 ms | $(check "$vp < 20") |")
	rows+=("| Firecrawl compatibility: p99 ms | $(xj .v2.p99_ms) | $(xj .scrape.p99_ms) | $(ratio "$(xj .v2.p99_ms)" "$(xj .scrape.p99_ms)")x | — | — |")
fi

if want crawl; then
	CR=$WORK/crawl-rounds.jsonl
	med() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
	cps=$(jq -r 'select(.side=="crawl") | .pages_per_s' "$CR" | med)
	jps=$(jq -r 'select(.side=="job") | .pages_per_s' "$CR" | med)
	cratio=$(jq -s -r 'group_by(.round)[] | (map(select(.side=="crawl"))[0].pages_per_s / map(select(.side=="job"))[0].pages_per_s)' "$CR" | med)
	per=$(jq -s -r '[group_by(.round)[] | (map(select(.side=="crawl"))[0].pages_per_s / map(select(.side=="job"))[0].pages_per_s * 100 | round / 100)] | map(tostring) | join(", ")' "$CR")
	cpages=$(jq -r 'select(.side=="crawl") | .pages' "$CR" | head -n1)
	rows+=("| Firecrawl compatibility: site crawl (\`POST /v2/crawl\`, limit $CRAWL_PAGES, from the corpus's index page, polled to completed) through the gate, pages/s, median of $CRAWL_ROUNDS rounds ($cpages pages a crawl) | $(printf '%.1f' "$cps") | $(printf '%.1f' "$jps") (the same URLs as one batch scrape, a job, each side on a fresh \`trawl dev\`, interleaved) | $(printf '%.2f' "$cratio")x (per round: $per) | ≥ 0.8x the job | $(check "$cratio >= 0.8") |")
fi

if want search; then
	S=$WORK/search.json
	sj() { jq -r "$1" "$S"; }
	n=$(sj .indexed_pages)
	rows+=("| Search through the gate, p50 ms ($(sj .queries) distinct one-word queries, $n pages indexed) | $(sj .gate_p50_ms) | $(sj .fts5_p50_ms) (SQLite FTS5, same pages, in process) | $(ratio "$(sj .gate_p50_ms)" "$(sj .fts5_p50_ms)")x | p50 < 10 ms | $(check "$(sj .gate_p50_ms) < 10") |")
	rows+=("| Search through the gate, p99 ms | $(sj .gate_p99_ms) | $(sj .fts5_p99_ms) (FTS5) | $(ratio "$(sj .gate_p99_ms)" "$(sj .fts5_p99_ms)")x | p99 < 50 ms | $(check "$(sj .gate_p99_ms) < 50") |")
	rows+=("| Search \`rich=1\` through the gate, p50 ms (p99 $(sj .rich_p99_ms)) | $(sj .rich_p50_ms) | $(sj .fts5_p50_ms) (FTS5, plain) | $(ratio "$(sj .rich_p50_ms)" "$(sj .fts5_p50_ms)")x | p50 < 30 ms | $(check "$(sj .rich_p50_ms) < 30") |")
	rows+=("| Search in the cell's index in process, p50 / p99 ms | $(sj .local_p50_ms) / $(sj .local_p99_ms) | $(sj .fts5_p50_ms) / $(sj .fts5_p99_ms) (FTS5) | $(ratio "$(sj .local_p50_ms)" "$(sj .fts5_p50_ms)")x | — | — |")
	x=$(sj .index_pages_per_s_beside_job)
	rows+=("| Indexing beside a running job, pages/s (the live path: $(sj .pages) pages as scrapes hand them, converted, through an Indexer into a fresh index, anchor text included; the job's $(sj .job_pages_during_live_index) pages meanwhile) | $x | $(sj .fts5_pages_per_s) (FTS5, pages already converted, nothing else running); ours on the same converted pages, one batch at a time, $(sj .ours_docs_pages_per_s) | $(ratio "$x" "$(sj .fts5_pages_per_s)")x | ≥ 300 | $(check "$x >= 300") |")
	rows+=("| Rebuild from the archive beside a running job, pages/s ($(sj .rebuild_pages) pages, main content made again from the HTML, indexed into a fresh index; the job's $(sj .job_pages_during_rebuild) pages meanwhile) | $(sj .rebuild_pages_per_s_beside_job) | — | — | — | — |")
	rows+=("| Pages fetched, archived and indexed through jobs, pages/s (one cell) | $(sj .job_pages_per_s) | — | — | — | — |")
	rows+=("| Index on disk, MiB ($n pages) / process RSS (gate, ledger, cell, test in one; peak $(sj .rss_peak)) | $(sj .index_mib) / $(sj .rss) | — | — | reported | — |")
fi

if want searchq; then
	while read -r run; do
		rj() { jq -r "$1" <<<"$run"; }
		d=$(awk -v a="$(rj .trawl_mrr10)" -v b="$(rj .fts5_mrr10)" 'BEGIN{printf "%+.3f", a-b}')
		rows+=("| Search ranking, $(rj .name) (held out: $(rj .pages) pages, $(rj .queries) known-item queries from its index), MRR@10 through the gate | $(rj .trawl_mrr10) | $(rj .fts5_mrr10) (SQLite FTS5 bm25, best of its setups: $(rj .fts5_setup); same pages) | $d | ≥ FTS5 + 0.05 (goal 0.85) | $(check "$(rj .trawl_mrr10) >= $(rj .fts5_mrr10) + 0.05") |")
		rows+=("| Search ranking, $(rj .name), success@10 | $(rj .trawl_success10) | $(rj .fts5_success10) | $(awk -v a="$(rj .trawl_success10)" -v b="$(rj .fts5_success10)" 'BEGIN{printf "%+.3f", a-b}') | ≥ FTS5 | $(check "$(rj .trawl_success10) >= $(rj .fts5_success10)") |")
	done < <(jq -c '.corpora[]' "$WORK/searchq.json")
fi
if want metaq; then
	while read -r row; do
		mj() { jq -r "$1" <<<"$row"; }
		[[ $(mj .field) != "headline F1≥0.9" ]] || continue
		t=$(mj .trawl) b=$(mj .trafilatura)
		if [[ $(mj .setting) == stripped ]]; then how=removed target="≥ go-trafilatura (goal 0.95)" res=$(check "$t >= $b"); else how=kept target="reported" res="—"; fi
		rows+=("| Extract $(mj .field), article pages with JSON-LD and meta $how, held out ($(mj .pages) pages; truth: $(mj .truth)) | $t | $b (go-trafilatura's metadata) | $(awk -v a="$t" -v b="$b" 'BEGIN{printf "%+.3f", a-b}') | $target | $res |")
	done < <(jq -c '.heldout[]' "$WORK/metaq.json")
fi

if want jobshare; then
	J=$WORK/jobshare.json
	jj() { jq -r "$1" "$J"; }
	x=$(printf '%.2f' "$(jj .ratio)")
	rows+=("| Job sharing: one job of $(jj .urls) URLs at $(jj .delay_ms) ms a page through the gate, seconds to done on three clustered cells (fetched per cell: $(jq -c .fetched_per_cell "$J")) | $(printf '%.1f' "$(jj .three_cells_s)") | $(printf '%.1f' "$(jj .one_cell_s)") (one cell, \`trawl dev\`) | ${x}x faster | ≥ 2.7x | $(check "$x >= 2.7") |")
	x=$(ratio "$(jj .crawl_one_cell_s)" "$(jj .crawl_three_cells_s)")
	rows+=("| Job sharing: a Firecrawl site crawl (\`POST /v2/crawl\`) of a $(jj .crawl_pages)-page tree at $(jj .delay_ms) ms a page, seconds to completed on three clustered cells | $(printf '%.1f' "$(jj .crawl_three_cells_s)") | $(printf '%.1f' "$(jj .crawl_one_cell_s)") (one cell) | ${x}x faster | ≥ 2x | $(check "$x >= 2") |")
fi

commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo none)
git -C "$REPO" diff --quiet HEAD 2>/dev/null || commit="$commit (dirty)"
{
	echo "## make bench — $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "Machine: $(nproc) cores, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), load at start $LOAD_START, at the end $(cut -d' ' -f1-3 /proc/loadavg)."
	if want_corpus; then
		echo "Commit $commit; $(go env GOVERSION); node $(node --version 2>/dev/null || echo -); $(wrk --version 2>&1 | head -n1 | cut -d' ' -f1-2)."
	else
		echo "Commit $commit; $(go env GOVERSION)."
	fi
	if want_corpus; then
		echo "Corpus: $CORPUS ($NPAGES pages), served by bench/fileserver (Go http.FileServer) on 127.0.0.1."
		! want scrape || echo "wrk: -t$WRK_THREADS -c$WRK_CONNS -d$WRK_DURATION --latency, for both sides of row 2."
	fi
	echo
	echo "| Measure | trawl | Baseline | Ratio | Target | Result |"
	echo "|---|---|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
	echo
	if want pipeline || want scrape || want job; then
		echo "Baselines: row 1 = JSDOM 29 + @mozilla/readability + Turndown + turndown-plugin-gfm (bench/js), same pages, one at a time, after $PIPELINE_WARMUP warm-up pages;"
		echo "row 2 = wrk GET on the file server over the same paths (the cache-hit ceiling: raw bytes, no JSON); row 3 = GETs of the same URLs from bench/loadgen at concurrency $JOB_CONCURRENCY."
		! want scrape || echo "Row 2's trawl side is a cell behind bench/cellfront (each request signed for the region on arrival and checked by the cell, as behind the gate; no hop)."
		! want job || echo "Row 3's trawl side is \`trawl cell\` with the run's region key; bench/loadgen submits and polls the job with signed requests."
	fi
	if want ledger; then
		echo "Ledger rows (bench/ledger, one process each, loopback, data on disk): charges of $(jq .amount_mc "$LT") mc over $(jq .accounts "$LT") accounts, 1 s warm-up, Client defaults (settle every 1 s or 1,000 charges);"
		echo "the baseline writes the same JSON charge with one \`store.Set(…, store.Sync)\` each (Pebble still shares an fsync among concurrent syncers). CPU = user+system of the process."
		echo "Latency: voters eu (leader), sin, us on 127.0.0.1/2/3; us ↔ others $(jq .delay_ms "$LL") ms each way on Raft (delay proxies) and forwarded commands (delaying RoundTripper); the Client runs in us."
	fi
	if want gate; then
		G=$WORK/gate.json
		echo "Gate rows: \`trawl dev\` (gate + cell + one-voter ledger in one process, tracing off) with a bench price table (no rate or concurrency limit on the free plan, large sign-up grant);"
		echo "\"direct\" = a cell of the same code and defaults in its own process behind bench/cellfront, which signs each request for the region on arrival (the cell checks it, as behind the gate; no hop: wrk cannot sign, and trawl dev's cell answers only its gate)."
		echo "bench/caddyplain = the same Caddy with only \`reverse_proxy\` to a cell and the gate's proxy settings (flush_interval -1, keepalive_idle_conns_per_host 256, …): \"plain\" in its own process"
		echo "in front of that direct cell; \"plain+cell\" with a cell of its own (same code and defaults, signed on arrival) in its process, like trawl dev's gate and cell."
		echo "${R[gate_n]} URLs warmed once, every timed request a cache hit (gate's x-svc-cost ${R[gate_cost]}; the account's month_spent ${R[gate_spent]}); all four sides get the same requests with the dev key."
		echo "$(jq .rounds "$G") rounds of direct, plain, plain+cell, gate back to back (order rotating), $GATE_DURATION each under load, then $GATE_LOW_DURATION each at 1 connection; figures are medians per side,"
		echo "ratios and differences the medians of the per-round ones: gate/direct req/s $(jq -c .per_round.load_gate_direct "$G"), gate/plain $(jq -c .per_round.load_gate_plain "$G"),"
		echo "gate/plain+cell $(jq -c .per_round.load_gate_plaincell "$G"), gate − cell p50 at low load $(jq -c .per_round.low_gate_over_p50 "$G") ms, gate/plain+cell CPU per request $(jq -c .per_round.load_cpu_gate_plaincell "$G"). Load average at the gate part's start ${R[gate_load_start]}, at its end ${R[gate_load_end]}."
	fi
	if want extract; then
		echo "Extract rows (bench/extract): \`trawl dev\` with a bench price table (no limits), no model (the deterministic extractor); each page scraped once, then extracted once (checked: a cache hit), then in each round scraped and extracted back to back, the order alternating by round, one request at a time with the dev key; schema: title, date, sections (an array of objects). Load average at the part's start ${R[x_load_start]}, at its end ${R[x_load_end]}."
	fi
	if want crawl; then
		echo "Crawl row (bench/crawl): each side on its own fresh \`trawl dev\` (bench price table, no limits, no browser), so neither finds the other's pages in its cache; the job takes the URLs the first crawl scraped; the first side alternates by round; both poll every 200 ms for the documents they have not seen. Load average at the part's start ${R[c_load_start]}, at its end ${R[c_load_end]}."
	fi
	if want browser; then
		echo "Browser rows (bench/browser): \`trawl cell --browsers 1 --fresh-for -1s\` (pool defaults), each page POSTed with \`wait_for: body\` (straight to the browser) and a query of its own; 503 fleet-busy answers are repeated after Retry-After, as the API asks, and count as failures only after 120 s."
		echo "Bare Chromium: one Debian Chromium launched by playwright-go in the bench process, $(jq .concurrency "$WORK/browser.json") pages at a time, a fresh context each (goto, load, content), no pool, guard proxy or cell. Pool counters at the end: ${R[br_health]}. Load average at the part's start ${R[br_load_start]}, at its end ${R[br_load_end]}."
	fi
	if want search; then
		echo "Search rows (regiontest TestSearchSpeed): one gate, one cell, in the test's process; the corpora's pages served under as many path prefixes as make $(jq .pages "$WORK/search.json") URLs (copies are near-duplicates: indexed each, collapsed in answers); queries are words of the pages' file names, each once (none from the gate's archive of results). FTS5: modernc.org/sqlite, \`porter unicode61\`, bm25 with the title weighted 10. Load average at the part's start ${R[s_load_start]}, at its end ${R[s_load_end]}."
	fi
	if want searchq; then
		echo "Search ranking rows (regiontest TestSearchQuality): per corpus a fresh gate and cell in the test's process; the package's pages (its index pages left out) served from loopback, fetched by one job through the gate, archived and indexed; queries are the terms of the package's own back-of-book index (Sphinx genindex), up to 1,000 taken evenly, relevant = the pages the entry points to; asked at GET /search. None of these corpora was tuned on (docs/search.md). Load average at the part's start ${R[sq_load_start]}, at its end ${R[sq_load_end]}."
	fi
	if want jobshare; then
		echo "Job sharing row (cmd/trawl TestJobsScaleAcrossCells, real processes on loopback): an httptest site whose every page (a title and a paragraph, distinct by its query) answers after 200 ms; one cell = \`trawl dev\` (the gate and one standalone cell, today's local path); three cells = \`trawl dev --route-listen\` (the gate and c1) and two \`trawl cell --route-listen --members-join\` processes, their JetStream nodes one cluster, every cell's /health saying jobs_shared before the submission; --job-concurrency $(jq .concurrency "$WORK/jobshare.json") per cell on both sides; the time is from the submission to the first status poll (every 50 ms) that says done, every URL then checked exactly once in the results. Load average at the part's start ${R[js_load_start]}, at its end ${R[js_load_end]}."
	fi
	if want metaq; then
		echo "Metadata rows (bench/metaeval): go-trafilatura's test pages and the article extraction benchmark's; truth \"page tags\" = each page's own JSON-LD and meta tags, read before they are removed; \"person\" = the expected metadata a person wrote for go-trafilatura's comparison pages; held out = FNV-32a of the page's name mod 3 == 0; both extractors in one process on the same pages (bench/metaeval/README.md). Load average at the part's start ${R[mq_load_start]}, at its end ${R[mq_load_end]}."
	fi
	if [[ $ONLY == "$ALL_PARTS" ]]; then
		echo "Command: \`make bench\` (= \`bash bench/run.sh\`)."
	else
		echo "Command: \`BENCH_ONLY=$ONLY bash bench/run.sh\`."
	fi
} >"$WORK/results.md"

# A full run replaces the results; a partial run (BENCH_ONLY) appends its
# table, so the figures of the parts it skipped stay.
if [[ $ONLY == "$ALL_PARTS" || ! -s $RESULTS ]]; then
	cp "$WORK/results.md" "$RESULTS"
else
	{ echo; cat "$WORK/results.md"; } >>"$RESULTS"
fi
MISSES=$(grep -c '\*\*fail\*\*' "$WORK/results.md" || true)
echo
cat "$WORK/results.md"
echo
if ((MISSES)); then
	echo "bench: $MISSES target(s) missed" >&2
	((STRICT == 0)) || exit 1
fi
