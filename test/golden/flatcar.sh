#!/bin/sh
# Rendered by oscar from OperatingSystemConfig default/flatcar-worker (type flatcar, purpose provision).
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

oscar_text /etc/containerd/config.toml 0644 root:root '# Written by oscar from spec.cri: the container runtime of this Kubernetes node.
version = 2

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
'
oscar_text /etc/hostname-prefix 0644 root:root flatcar-worker
oscar_text /opt/bin/node-setup.sh 0755 root:root '#!/bin/sh
set -eu
echo "node setup done"
'
oscar_text /etc/systemd/system/containerd.service.d/10-oscar-cri.conf 0644 root:root '# Written by oscar from spec.cri.
[Service]
Environment=CONTAINERD_CONFIG=/etc/containerd/config.toml
Delegate=yes
Restart=always
RestartSec=5
'
oscar_text /etc/systemd/system/node-setup.service 0644 root:root '[Unit]
Description=One-time node setup
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=/opt/bin/node-setup.sh
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
'

if [ -n "$ROOT" ]; then
  systemctl --root="$ROOT" mask locksmithd.service update-engine.service
  systemctl --root="$ROOT" enable containerd.service node-setup.service
else
  systemctl mask locksmithd.service update-engine.service
  systemctl daemon-reload
  systemctl stop locksmithd.service update-engine.service
  systemctl enable containerd.service node-setup.service
  systemctl --no-block restart containerd.service
  systemctl --no-block start node-setup.service
fi

oscar_parent /var/lib/oscar/provisioned
: >"$marker"
echo "oscar: done"
