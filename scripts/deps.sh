#!/usr/bin/env bash
# Installs what a target needs on a fresh Debian 12 machine, and nothing that
# is already there. Never installs Debian's nodejs/npm (they would replace the
# machine's Node).
set -euo pipefail
what=${1:-build}

need_apt=()
want() { dpkg -s "$1" >/dev/null 2>&1 || need_apt+=("$1"); }

case "$what" in
build) ;;
test) want postgresql-doc-15 ;;
bench) want postgresql-doc-15; want wrk; want jq; want curl ;;
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
fi

command -v go >/dev/null || { echo "deps: Go is required (https://go.dev/dl)" >&2; exit 1; }
go mod download

# Stripe's own API mock, for the payment provider's tests (pinned: the tests
# check ids from this version's fixtures).
if [[ $what == test ]]; then
  command -v stripe-mock >/dev/null || [[ -x "$(go env GOPATH)/bin/stripe-mock" ]] ||
    go install github.com/stripe/stripe-mock@v0.203.0
fi
