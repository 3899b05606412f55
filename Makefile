# trawl — see README.md. Every target installs what it needs on a fresh
# Debian machine (scripts/deps.sh); nothing is downloaded at run time.
GO      ?= go
BIN     := bin/trawl
PKGS    := ./...
# Packages whose tests start the trawl binary build it themselves (TestMain);
# TRAWL_BIN lets them reuse this one.
export TRAWL_BIN := $(abspath $(BIN))

.PHONY: all build run test bench lint deps deps-test deps-bench deps-browser clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/trawl

# The embedded default on 127.0.0.1:8080, data in ./data. It may fetch
# loopback addresses so the README example works offline (see README.md).
# The whole engine ladder serves it, so Chromium and the Playwright driver
# are installed first, as for the tests.
run: deps-browser build
	$(BIN) dev --listen 127.0.0.1:8080 --data ./data --allow-private-networks

deps:
	bash scripts/deps.sh build

deps-test:
	bash scripts/deps.sh test

deps-bench:
	bash scripts/deps.sh bench

# Debian's Chromium and the Playwright driver for the headless-browser tests.
deps-browser:
	bash scripts/deps.sh browser

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

# Everything CI runs: lint, then every test under the race detector. The
# browser tests must run here: a missing Chromium fails them instead of
# skipping.
test: deps-test lint build
	TRAWL_REQUIRE_BROWSER=1 $(GO) test -race -count=1 -timeout 20m $(PKGS)
	# deploy/ is its own module (the Dockerfile and compose parsers stay
	# out of the binary's): images, compose and systemd units.
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...
	# terraform/ is its own module too (terraform-plugin-framework stays out
	# of the binary): the provider's acceptance test runs OpenTofu
	# (scripts/deps.sh builds it once) against trawl dev.
	cd terraform && $(GO) vet ./... && $(GO) test -count=1 -timeout 20m ./...
	# The crawl server's memory bound, measured without the race detector.
	TRAWL_REQUIRE_BROWSER=1 $(GO) test -count=1 -timeout 10m -run 'TestLoad100Concurrent$$' ./cell/crawl/
	# The search ranking's floor against SQLite FTS5 (python3.11-doc),
	# without the race detector too: its page conversion is too slow under it.
	$(GO) test -count=1 -timeout 10m -run 'TestRankingFloor$$' ./cell/search/eval/

bench: deps-bench build
	bash bench/run.sh

clean:
	rm -rf bin
