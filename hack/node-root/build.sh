#!/usr/bin/env bash
# Builds (once) and caches a minimal Debian bookworm root with systemd and cloud-init, used
# read-only by the node e2e tests (systemd-nspawn --volatile=overlay) and as the lower layer of
# the overlays the renderer tests apply cloud-config into. Prints the root's path on stdout.
#
# The cache key is a hash of the recipe below, so changing the package list or the image tweaks
# builds a new root next to the old one instead of mutating a root a test may be using.
#
# Env: OSCAR_CACHE (default ~/.cache/oscar), OSCAR_DEBIAN_MIRROR (default: the bookworm mirror
# configured in /etc/apt/sources.list.d, else deb.debian.org).
set -euo pipefail

suite=bookworm
# python3-cffi-backend: without it debootstrap fails configuring python3-cryptography (cloud-init).
# curl + ca-certificates: the provision bootstrap downloads with curl. procps/iproute2: tests
# inspect processes and addresses inside the node.
# containerd + runc + containernetworking-plugins (+ iptables, which the portmap plugin calls): the
# container runtime and CNI plugins of the Kubernetes node e2e (an image with the prerequisites,
# like a provider's node image; kubelet itself comes from hack/testenv/build.sh --node).
include=systemd,systemd-sysv,dbus,cloud-init,python3-cffi-backend,ca-certificates,curl,procps,iproute2,containerd,runc,containernetworking-plugins,iptables

# Image tweaks applied after debootstrap (part of the recipe hash).
# - Only the NoCloud data source (plus None): skips probing of every cloud's metadata service,
#   which otherwise costs seconds per boot and may time out without a network.
# - locale: C.UTF-8 (see below).
# - An empty /etc/machine-id makes systemd generate a transient id per boot, like a fresh image;
#   no /etc/hostname (it would be the build host's); a localhost-only /etc/hosts.
# - No apt package cache kept in the image.
# - containerd not enabled (see customize).
customize() {
  local root=$1
  mkdir -p "$root/etc/cloud/cloud.cfg.d"
  printf 'datasource_list: [ NoCloud, None ]\n' >"$root/etc/cloud/cloud.cfg.d/90-oscar-datasource.cfg"
  # minbase has no `locales`, so cloud-init's default locale (en_US.UTF-8) fails update-locale and
  # the node boots "degraded"; real images generate their locale, this one uses the built-in C.UTF-8.
  printf 'locale: C.UTF-8\n' >"$root/etc/cloud/cloud.cfg.d/91-oscar-locale.cfg"
  : >"$root/etc/machine-id"
  # debootstrap copies the build host's hostname; without the file the node is named after its
  # machine name (systemd-nspawn -M) or whatever cloud-init's meta-data says.
  rm -f "$root/etc/hostname"
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
  rm -f "$root/var/lib/dbus/machine-id"
  # containerd is installed but not enabled: every node test boots this root, and only a node
  # whose config enables containerd (the Kubernetes worker) should pay for it.
  rm -f "$root/etc/systemd/system/multi-user.target.wants/containerd.service"
  rm -f "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin
  rm -rf "$root"/var/lib/apt/lists/*
}

recipe_version=2
recipe_hash=$(
  {
    echo "$recipe_version $suite $include"
    declare -f customize
  } | sha256sum | cut -c1-12
)

cache=${OSCAR_CACHE:-$HOME/.cache/oscar}
dir=$cache/node-root
root=$dir/$suite-$recipe_hash

if [[ -e $root/.oscar-complete ]]; then
  echo "$root"
  exit 0
fi

log() { echo "node-root: $*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
  log "building the root needs root (debootstrap)"
  exit 1
fi
command -v debootstrap >/dev/null || {
  log "debootstrap missing; run hack/deps.sh"
  exit 1
}

mirror_from_sources() {
  # First deb822 "URIs:" whose stanza lists the suite; then a one-line "deb URI suite" entry.
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] || continue
    awk -v suite="$suite" '
      /^[[:space:]]*$/ { if (uri != "" && hit) { print uri; exit } uri = ""; hit = 0; next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) hit = 1 }
      END { if (uri != "" && hit) print uri }
    ' "$f" | head -n1
  done | head -n1
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v suite="$suite" '$1 == "deb" && $3 == suite { print $2; exit }' || true
}
mirror=${OSCAR_DEBIAN_MIRROR:-$(mirror_from_sources | head -n1 || true)}
mirror=${mirror:-http://deb.debian.org/debian}

mkdir -p "$dir"
# Serialise concurrent builders (parallel test processes): the second one waits, then finds the
# completed root.
exec 9>"$dir/.lock"
flock 9
if [[ -e $root/.oscar-complete ]]; then
  echo "$root"
  exit 0
fi

tmp=$(mktemp -d "$dir/.building-$suite-$recipe_hash.XXXXXX")
# An EXIT trap's last status becomes the script's: it must end in success on every path,
# including the successful one where $tmp is already empty.
cleanup() {
  if [[ -n ${tmp:-} && -d $tmp ]]; then rm -rf --one-file-system "$tmp"; fi
  return 0
}
trap cleanup EXIT

log "building $root from $mirror (takes a few minutes, once)"
start=$(date +%s)
if ! debootstrap --variant=minbase --include="$include" "$suite" "$tmp" "$mirror" >"$tmp.log" 2>&1; then
  log "debootstrap failed; last lines of $tmp.log:"
  tail -n 30 "$tmp.log" >&2
  exit 1
fi
customize "$tmp"
chmod 0755 "$tmp" # mktemp -d made it 0700; as the node's "/" that would lock out non-root services
echo "$recipe_version $suite $include" >"$tmp/.oscar-complete"
rm -rf --one-file-system "$root" # a half-renamed leftover cannot exist, but a manual edit may
mv -T "$tmp" "$root"
tmp=
rm -f "$dir"/.building-*.log

# Roots of older recipes are dead weight (~260 MB each): remove those no running node or overlay
# uses (a use shows up as an overlay lowerdir in some process's mountinfo).
for old in "$dir"/"$suite"-*; do
  [[ -d $old && $old != "$root" ]] || continue
  if grep -qsF "lowerdir=$old" /proc/[0-9]*/mountinfo; then
    log "keeping $old (in use)"
    continue
  fi
  log "removing old root $old"
  rm -rf --one-file-system "$old"
done
log "built in $(($(date +%s) - start)) s: $(du -sh --one-file-system "$root" | cut -f1)"
echo "$root"
