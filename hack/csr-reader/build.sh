#!/usr/bin/env bash
# Builds the Go CSR reader (main.go: kube-apiserver's and the signer's reading of a CSR) into
# ${OSCAR_CACHE:-$HOME/.cache/oscar}/csr-reader/<go version>_<source hash>/csr-reader.
# Idempotent: exits at once when that binary exists. Prints its path on stdout.
# Exit 3 = Go is missing (the differential test fails on it under CI=true, skips otherwise).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
if ! command -v go >/dev/null 2>&1; then
  echo "csr-reader/build.sh: 'go' is not on PATH; install Go >= 1.24 to build the differential CSR reader" >&2
  exit 3
fi
key="$(go env GOVERSION)_$(sha256sum go.mod main.go | sha256sum | cut -c1-12)"
out="${OSCAR_CACHE:-$HOME/.cache/oscar}/csr-reader/$key"
bin="$out/csr-reader"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
if [[ ! -x "$bin" ]]; then
  GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$out/.csr-reader.tmp" . >&2
  mv "$out/.csr-reader.tmp" "$bin"
fi
echo "$bin"
