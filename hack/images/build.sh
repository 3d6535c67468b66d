#!/usr/bin/env bash
# Builds (once) and caches the container images the Kubernetes node e2e runs pods from, without a
# registry: a busybox image from Debian's busybox-static, and a pause image (the pod sandbox) made
# of the same busybox. Both are written as docker archives that `ctr -n k8s.io images import`
# takes, into ${OSCAR_CACHE:-$HOME/.cache/oscar}/images/<recipe hash>/:
#   busybox.tar  localhost/oscar/busybox:<tag>
#   pause.tar    localhost/oscar/pause:<tag>
#   refs         one "file reference" line per image
# Prints that directory on stdout (everything else goes to stderr). The recipe hash covers this
# script and the busybox-static version, so a change builds a new directory next to the old one.
# Exit status: 0 built or cached; 3 a required tool (buildah, apt-get, dpkg-deb) is missing and
# could not be installed; anything else a failure.
# (Edit this file by writing a new one and renaming it: bash reads a running script lazily.)
set -euo pipefail

log() { echo "images: $*" >&2; }

# The pod sandbox only has to hold the pod's namespaces open, exit on TERM and reap orphans: a
# shell that waits on a sleeping child does all three (Kubernetes' pause is ~100 lines of C for the
# same job).
pause_cmd='trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done'

recipe() {
  echo "recipe 1 busybox-static=$1"
  echo "$pause_cmd"
  declare -f build_images
}

# $1 busybox binary, $2 tag, $3 output directory (empty), $4 buildah's scratch state.
build_images() {
  local busybox=$1 tag=$2 out=$3 state=$4
  local -a bh=(buildah --root "$state/storage" --runroot "$state/run" --storage-driver vfs)
  local rootfs=$state/rootfs
  mkdir -p "$rootfs/bin" "$rootfs/tmp"
  install -m 0755 "$busybox" "$rootfs/bin/busybox"
  local applet
  for applet in sh sleep echo cat ls date hostname wget nc true false env ps; do
    ln -s busybox "$rootfs/bin/$applet"
  done
  chmod 1777 "$rootfs/tmp"
  local c name
  for name in busybox pause; do
    c=$("${bh[@]}" from --quiet scratch)
    "${bh[@]}" copy --quiet "$c" "$rootfs/" / >/dev/null
    "${bh[@]}" config --env PATH=/bin --label "dev.oscar.recipe=$tag" "$c"
    if [[ $name == pause ]]; then
      "${bh[@]}" config --entrypoint '["/bin/sh", "-c", "'"${pause_cmd//\"/\\\"}"'"]' "$c"
    else
      "${bh[@]}" config --cmd /bin/sh "$c"
    fi
    "${bh[@]}" commit --quiet --format docker "$c" "localhost/oscar/$name:$tag" >/dev/null
    "${bh[@]}" push --quiet "localhost/oscar/$name:$tag" \
      "docker-archive:$out/$name.tar:localhost/oscar/$name:$tag"
    "${bh[@]}" rm "$c" >/dev/null
    echo "$name.tar localhost/oscar/$name:$tag" >>"$out/refs"
  done
}

need_tools() {
  local missing=()
  local t
  for t in buildah apt-get dpkg-deb; do command -v "$t" >/dev/null || missing+=("$t"); done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ " ${missing[*]} " == *" buildah "* ]] && command -v apt-get >/dev/null && [[ $(id -u) -eq 0 ]]; then
    log "installing buildah (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >&2 || true
    command -v buildah >/dev/null && return 0
  fi
  log "missing: ${missing[*]} (run hack/deps.sh)"
  exit 3
}

need_tools
version=$(apt-cache policy busybox-static 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
if [[ -z $version || $version == "(none)" ]]; then
  log "apt knows no busybox-static (run apt-get update)"
  exit 1
fi
hash=$(recipe "$version" | sha256sum | cut -c1-12)
tag=$hash
cache=${OSCAR_CACHE:-$HOME/.cache/oscar}
out=$cache/images/$hash
if [[ -f $out/.complete ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache/images"
exec 9>"$cache/images/.lock"
flock 9
if [[ -f $out/.complete ]]; then
  echo "$out"
  exit 0
fi

tmp=$(mktemp -d "$cache/images/.building-$hash.XXXXXX")
cleanup() {
  if [[ -n ${tmp:-} && -d $tmp ]]; then
    # buildah's vfs layers are plain directories; nothing stays mounted after push/rm
    rm -rf --one-file-system "$tmp"
  fi
  return 0
}
trap cleanup EXIT
start=$(date +%s)
log "building busybox and pause images from busybox-static $version (once)"
mkdir -p "$tmp/deb" "$tmp/x" "$tmp/out" "$tmp/state"
(cd "$tmp/deb" && apt-get download -qq "busybox-static=$version" >&2)
dpkg-deb -x "$tmp"/deb/busybox-static_*.deb "$tmp/x"
build_images "$tmp/x/bin/busybox" "$tag" "$tmp/out" "$tmp/state"
touch "$tmp/out/.complete"
chmod 0755 "$tmp/out"
rm -rf --one-file-system "$out"
mv -T "$tmp/out" "$out"
log "built in $(($(date +%s) - start)) s: $(du -sh "$out" | cut -f1)"
echo "$out"
