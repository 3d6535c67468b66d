#!/usr/bin/env bash
# Builds clusterctl from the Cluster API module pinned in go.mod (the same version as the manager
# build.sh builds) into the test cache, and prints its path. Its own dependencies are resolved in
# a scratch copy of go.mod/go.sum (from the Go module proxy), so the manager's go.sum — and the
# cache key derived from it — stay as they are.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module=sigs.k8s.io/cluster-api
version="$(awk -v m="$module" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
out="${OSCAR_CACHE:-$HOME/.cache/oscar}/capi/clusterctl-${version}"
if [[ -x "$out/clusterctl" ]]; then
  echo "$out/clusterctl"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "build-clusterctl.sh: 'go' is not on PATH" >&2
  exit 3
fi
mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
if [[ -x "$out/clusterctl" ]]; then
  echo "$out/clusterctl"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$here/go.mod" "$here/go.sum" "$tmp/"
cd "$tmp"
pkg=sigs.k8s.io/cluster-api/version
minor="${version#v1.}"
minor="${minor%%.*}"
GOFLAGS="-p=2 -trimpath -mod=mod" CGO_ENABLED=0 go build \
  -ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
  -o "$tmp/clusterctl" "$module/cmd/clusterctl" >&2
mv "$tmp/clusterctl" "$out/clusterctl"
echo "$out/clusterctl"
