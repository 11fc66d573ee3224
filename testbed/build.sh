#!/usr/bin/env bash
# Builds the test bed (real Kubernetes members for gitfleet's tests) into a folder outside the
# clone, and only when its sources changed: a stamp beside the binary holds the hash of go.mod,
# go.sum and the Go sources plus the Go version that built it.
#
#   bash testbed/build.sh            # builds if needed; prints the binary's path last
#
# The binary goes to $GITFLEET_TESTBED_DIR (default ${XDG_CACHE_HOME:-~/.cache}/gitfleet/testbed),
# where the end-to-end tests look for it. Go's module and build caches stay in their default
# places (outside the clone), so a second build after a change only compiles what changed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out_dir="${GITFLEET_TESTBED_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gitfleet/testbed}"
binary="$out_dir/testbed"

if ! command -v go >/dev/null 2>&1; then
  echo "testbed/build.sh: Go is required (go.mod says which version)" >&2
  exit 1
fi

# The same hash the test harness computes (tests/common/testbed.rs): each source's name, a
# newline, its content, in byte order of the names.
source_hash() {
  cd "$here"
  for f in $(LC_ALL=C ls go.mod go.sum *.go | LC_ALL=C sort); do
    printf '%s\n' "$f"
    cat "$f"
  done | sha256sum | cut -d' ' -f1
}
stamp="$(source_hash) $(go env GOVERSION)"
if [ -x "$binary" ] && [ "$(cat "$out_dir/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "testbed: up to date"
  echo "$binary"
  exit 0
fi

mkdir -p "$out_dir"
echo "testbed: building (k8s.io/kubernetes, kwok and etcd from Go modules; the first build takes a while)" >&2
start=$(date +%s)
cd "$here"
# One binary for every component; no symbols or paths, so it links faster and stays smaller.
go build -buildvcs=false -trimpath -ldflags='-s -w' -o "$binary.new" .
mv "$binary.new" "$binary"
echo "$stamp" >"$out_dir/stamp"
echo "testbed: built in $(($(date +%s) - start))s" >&2
echo "$binary"
