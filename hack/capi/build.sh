#!/usr/bin/env bash
# Builds Cluster API's core manager from the pinned Go module in this folder into
# ${OSCAR_CACHE:-$HOME/.cache/oscar}/capi/<version>_<hash>/ (bin/manager, and crds/ copied from the
# module's config/crd/bases), for the integration suite that runs the real Cluster API controllers.
# Idempotent: when the manager and the CRDs for this exact go.mod/go.sum exist it exits at once.
# (Edit this file by writing a new one and renaming it: bash reads a running script lazily.)
# Prints the output directory on stdout (everything else goes to stderr).
# Exit status: 0 built or cached; 3 a required tool (go) is missing; anything else a failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

module=sigs.k8s.io/cluster-api
version="$(awk -v m="$module" '$1 == m && $2 ~ /^v/ {print $2; exit}' go.mod)"
if [[ -z "$version" ]]; then
  echo "build.sh: could not read the $module version from $here/go.mod" >&2
  exit 1
fi
# go.sum fingerprint: a dependency bump with the same top-level version still rebuilds.
sum_hash="$(sha256sum go.mod go.sum | sha256sum | cut -c1-8)"
out="${OSCAR_CACHE:-$HOME/.cache/oscar}/capi/cluster-api-${version}_${sum_hash}"

complete() {
  [[ -x "$out/bin/manager" && -f "$out/crds/.complete" ]]
}

if complete; then
  echo "$out"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build.sh: 'go' is not on PATH; install Go >= $(awk '$1 == "go" {print $2}' go.mod) to build the Cluster API manager" >&2
  exit 3
fi

mkdir -p "$out"
# Two builds racing (two test runs) must not corrupt each other: serialise on a lock.
exec 9>"$out/.build.lock"
flock 9
if complete; then
  echo "$out"
  exit 0
fi

tmp="$(mktemp -d "$out/.tmp.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/crds"

# The machine is shared: 2 parallel compile jobs unless the caller chose otherwise.
export GOFLAGS="-p=2 ${GOFLAGS:-} -trimpath"
export CGO_ENABLED=0

start=$SECONDS
echo "build.sh: building the Cluster API core manager $version (a cold build takes ~10-15 min)" >&2

pkg=sigs.k8s.io/cluster-api/version
minor="${version#v1.}"
minor="${minor%%.*}"
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
go build -ldflags "$ldflags" -o "$tmp/bin/manager" "$module"

# The CRDs ship in the module (v1.14 moved them to core/config/crd/bases).
src="$(go list -m -f '{{.Dir}}' "$module")"
crds=""
for d in "$src/config/crd/bases" "$src/core/config/crd/bases"; do
  [[ -d "$d" ]] && crds="$d" && break
done
if [[ -z "$crds" ]]; then
  echo "build.sh: $module $version carries no config/crd/bases" >&2
  exit 1
fi
cp "$crds"/*.yaml "$tmp/crds/"
chmod 644 "$tmp/crds/"*.yaml
touch "$tmp/crds/.complete"
echo "build.sh: built in $((SECONDS - start))s" >&2

rm -rf "$out/bin" "$out/crds"
mv "$tmp/bin" "$out/bin"
mv "$tmp/crds" "$out/crds"
rm -rf "$tmp"
trap - EXIT
echo "$out"
