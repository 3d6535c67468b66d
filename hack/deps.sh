#!/usr/bin/env bash
# Installs every Debian package the test suites need (validators, node containers).
# Idempotent and fast when everything is present: dpkg-query decides, apt only runs when
# something is missing. Safe to run concurrently with another apt/dpkg run: it waits for the lock.
set -euo pipefail

# Packages and why they are needed.
packages=(
  cloud-init        # cloud-config schema validator and `single --name write_files` applier
  ignition          # ignition-validate + the full ignition binary (dracut module) for the files stage
  shellcheck        # script validator
  debootstrap       # builds the cached node root (hack/node-root/build.sh)
  openssl           # test certificates
  iproute2          # network inspection in node tests
  procps            # pgrep: finds the container's systemd
  util-linux        # unshare, nsenter, setsid
  python3           # /usr/bin/python3 runs the cloud-init schema helper
  ca-certificates   # debootstrap over https mirrors
  buildah           # npm run image: builds the controller image from scratch (no registry base)
  podman            # runs that image in the install test
  runc              # podman's runtime here: Debian 12's crun refuses hybrid cgroups
  binutils          # strip, for the image's Node.js binary
  curl              # the bootstrap additions' agent install script, run in its unit test
  wget              # … which must also work with wget alone
  gpg               # signs the file apt repository of the install-order node test
  qemu-user-static  # runs the linux-arm64 executables (npm run build:bin) in their tests
  prometheus        # promtool: checks and unit-tests deploy/monitoring's alerting rules
  binutils-aarch64-linux-gnu  # aarch64-linux-gnu-strip, for the arm64 Node.js binary
  libc6-arm64-cross           # the arm64 Node.js's glibc, for qemu (-L /usr/aarch64-linux-gnu)
  libstdc++6-arm64-cross      # … and its libstdc++
)

if [[ $(id -u) -ne 0 ]]; then
  echo "hack/deps.sh: must run as root (apt-get install)" >&2
  exit 1
fi

# systemd-container must match the host systemd exactly, so installing it never upgrades systemd.
systemd_version=$(dpkg-query -W -f='${Version}' systemd 2>/dev/null || true)
if [[ -z $systemd_version ]]; then
  echo "hack/deps.sh: systemd is not installed on this host; cannot pin systemd-container" >&2
  exit 1
fi

installed() { # $1 = package, $2 = optional exact version
  local status version
  status=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) || return 1
  [[ $status == installed ]] || return 1
  if [[ -n ${2:-} ]]; then
    version=$(dpkg-query -W -f='${Version}' "$1")
    [[ $version == "$2" ]] || return 1
  fi
}

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
installed systemd-container "$systemd_version" || missing+=("systemd-container=$systemd_version")

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "hack/deps.sh: installing ${missing[*]}" >&2

# Another apt/dpkg run may hold the lock (e.g. a machine bootstrap still installing). Wait for it
# instead of failing; apt's own lock timeout covers the gap between our check and our install.
wait_for_apt() {
  local waited=0
  while pgrep -x apt-get >/dev/null || pgrep -x apt >/dev/null || pgrep -x dpkg >/dev/null; do
    if ((waited % 30 == 0)); then echo "hack/deps.sh: waiting for a running apt/dpkg to finish" >&2; fi
    sleep 2
    waited=$((waited + 2))
    if ((waited > 1800)); then
      echo "hack/deps.sh: apt/dpkg still busy after 30 min; giving up" >&2
      exit 1
    fi
  done
}

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
wait_for_apt
apt-get -q -o DPkg::Lock::Timeout=600 update >&2
wait_for_apt
apt-get install "${apt_opts[@]}" "${missing[@]}" >&2

# Verify: a package that apt silently skipped must fail here, not later in a confusing test.
for p in "${packages[@]}"; do
  installed "$p" || { echo "hack/deps.sh: $p still not installed" >&2; exit 1; }
done
installed systemd-container "$systemd_version" || {
  echo "hack/deps.sh: systemd-container $systemd_version not installed" >&2
  exit 1
}
