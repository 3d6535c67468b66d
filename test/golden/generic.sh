#!/bin/sh
# Rendered by oscar from OperatingSystemConfig default/generic-edge (type generic, purpose reconcile).
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

oscar_text /etc/edge-proxy/proxy.conf 0640 root:root 'listen 127.0.0.1:8080
upstream 127.0.0.1:9090
'
oscar_text /etc/systemd/system/edge-proxy.service 0644 root:root '[Unit]
Description=Edge proxy (demo: a shell loop that re-reads its config on SIGHUP)

[Service]
ExecStart=/bin/sh -c '\''trap "echo reloaded" HUP; while :; do sleep 1; done'\''
ExecReload=/bin/kill -HUP $MAINPID
Restart=always

[Install]
WantedBy=multi-user.target
'

if [ -n "$ROOT" ]; then
  systemctl --root="$ROOT" enable edge-proxy.service
else
  systemctl daemon-reload
  systemctl enable edge-proxy.service
  systemctl start edge-proxy.service
fi
echo "oscar: done"
