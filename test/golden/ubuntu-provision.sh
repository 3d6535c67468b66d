#!/bin/sh
# Rendered by oscar from OperatingSystemConfig default/worker-provision (type ubuntu, purpose provision).
# Needs only sh, mkdir, rm, base64, chmod, chown and systemctl. Run it as root; running it again
# is safe. ROOT=DIR writes below DIR instead of /, enables units with systemctl --root=DIR and
# starts and installs nothing.
set -eu
ROOT=${ROOT:-}
# files are created private and get their final mode once complete
umask 077

# oscar_parent PATH: the directories above PATH, mode 0755 as an OS creates them
oscar_parent() {
  (umask 022 && mkdir -p "$ROOT${1%/*}/")
}

# oscar_finish PATH MODE OWNER: owner first, since chown clears setuid and setgid bits
oscar_finish() {
  chown "$3" "$ROOT$1"
  chmod "$2" "$ROOT$1"
}

# oscar_new PATH: a new file is written, never the old one: an existing file may be readable
# by others (and open in a reader), or a link to elsewhere; rm removes a link, not its target
oscar_new() {
  oscar_parent "$1"
  rm -f "$ROOT$1"
}

# oscar_text PATH MODE OWNER TEXT: writes TEXT exactly (printf adds no newline)
oscar_text() {
  oscar_new "$1"
  printf '%s' "$4" >"$ROOT$1"
  oscar_finish "$1" "$2" "$3"
}

# oscar_b64 PATH MODE OWNER: writes the base64 text on standard input, decoded
oscar_b64() {
  oscar_new "$1"
  base64 -d >"$ROOT$1"
  oscar_finish "$1" "$2" "$3"
}

# provision runs once: a reboot finds the marker and stops here
marker="$ROOT/var/lib/oscar/provisioned"
if [ -e "$marker" ]; then
  echo "oscar: $marker exists: already provisioned"
  exit 0
fi

oscar_text /etc/modules-load.d/k8s.conf 0644 root:root 'overlay
br_netfilter
'
oscar_text /etc/oscar/node.env 0600 root:root 'OSCAR_NODE_POOL=workers
OSCAR_CLUSTER=demo
'
oscar_text /etc/systemd/system/oscar-first-boot.service 0644 root:root '[Unit]
Description=Record the first boot of this machine
ConditionPathExists=!/var/lib/oscar/first-boot

[Service]
Type=oneshot
ExecStart=/bin/mkdir -p /var/lib/oscar
ExecStart=/bin/touch /var/lib/oscar/first-boot
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
'

# oscar_packages NAME[=VERSION]...: installs packages with the OS package manager, under the
# OS's usual umask: the files and directories maintainer scripts make must not come out private
oscar_packages() (
  umask 022
  DEBIAN_FRONTEND=noninteractive apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Options::=--force-confold -o APT::Cmd::Pattern-Only=true "$@"
)
if [ -z "$ROOT" ]; then
  oscar_packages ca-certificates curl
fi

if [ -n "$ROOT" ]; then
  systemctl --root="$ROOT" enable oscar-first-boot.service
else
  systemctl daemon-reload
  systemctl enable oscar-first-boot.service
  systemctl --no-block start oscar-first-boot.service
fi

oscar_parent /var/lib/oscar/provisioned
: >"$marker"
echo "oscar: done"
