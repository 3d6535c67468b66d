#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and etcd from the pinned Go modules in this
# folder into ${OSCAR_CACHE:-$HOME/.cache/oscar}/testenv/<versions>/bin; with --node also kubelet,
# kubeadm and kube-scheduler (for the Kubernetes node e2e: nodes, and pods scheduled onto them),
# from the same module set and with the same version stamp, so a Node reports the API server's
# version.
# Idempotent: when the binaries for these exact versions exist it exits at once.
# (Edit this file by writing a new one and renaming it: bash reads a running script lazily.)
# Prints the bin directory on stdout (everything else goes to stderr).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# Read the pinned versions straight from go.mod so the cache key cannot drift.
kube_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' go.mod)"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' go.mod)"
if [[ -z "$kube_version" || -z "$etcd_version" ]]; then
  echo "build.sh: could not read k8s.io/kubernetes / go.etcd.io/etcd/server/v3 versions from $here/go.mod" >&2
  exit 1
fi
# go.sum fingerprint: a dependency bump with the same top-level versions still rebuilds.
sum_hash="$(sha256sum go.mod go.sum | sha256sum | cut -c1-8)"
cache_root="${OSCAR_CACHE:-$HOME/.cache/oscar}/testenv"
out="$cache_root/kube-${kube_version}_etcd-${etcd_version}_${sum_hash}"
bin="$out/bin"

binaries=(kube-apiserver kube-controller-manager kubectl etcd)
case "${1:-}" in
  '') ;;
  --node) binaries+=(kubelet kubeadm kube-scheduler) ;;
  *)
    echo "build.sh: unknown argument ${1}; usage: build.sh [--node]" >&2
    exit 2
    ;;
esac
complete() {
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

if complete; then
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  # Exit 3 = a required tool is missing (the test setup reports it as such).
  echo "build.sh: 'go' is not on PATH; install Go >= $(awk '$1 == "go" {print $2}' go.mod) to build the test API server" >&2
  exit 3
fi

mkdir -p "$out"
# Two builds racing (e.g. two test runs) must not corrupt each other: serialise on a lock.
exec 9>"$out/.build.lock"
flock 9
if complete; then
  echo "$bin"
  exit 0
fi

tmp="$(mktemp -d "$out/.tmp-bin.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT

# Stamp the real release into the binaries: an unversioned apiserver reports
# v0.0.0 and kubectl then warns about version skew.
minor="${kube_version#v1.}"
minor="${minor%%.*}"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$kube_version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"

# The machine is shared: default to 2 parallel compile jobs unless the caller chose.
export GOFLAGS="-p=2 ${GOFLAGS:-} -trimpath"
export CGO_ENABLED=0

start=$SECONDS
echo "build.sh: building what is missing of ${binaries[*]} ($kube_version, etcd $etcd_version; a cold build takes 15-45 min, kubelet + kubeadm + kube-scheduler ~12 more)" >&2
build() { # $1 = binary name, $2 = package, $3 = ldflags
  [[ -x "$bin/$1" ]] && return 0
  echo "build.sh: $1" >&2
  go build -ldflags "$3" -o "$tmp/$1" "$2"
}
for b in "${binaries[@]}"; do
  case "$b" in
    etcd) build etcd go.etcd.io/etcd/server/v3 "-s -w" ;;
    *) build "$b" "k8s.io/kubernetes/cmd/$b" "$ldflags" ;;
  esac
done
echo "build.sh: built in $((SECONDS - start))s" >&2

# Each binary lands whole (rename within one file system): a reader never sees half of one.
mkdir -p "$bin"
for f in "$tmp"/*; do
  [[ -e "$f" ]] && mv -f "$f" "$bin/"
done
rm -rf "$tmp"
trap - EXIT
echo "$bin"
