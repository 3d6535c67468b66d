#!/bin/sh
# Rendered by oscar from OperatingSystemConfig default/worker-reconcile (type ubuntu, purpose reconcile).
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

oscar_text /etc/containerd/config.toml 0644 root:root '# Written by oscar from spec.cri: the container runtime of this Kubernetes node.
version = 2

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
'
oscar_text /etc/default/kubelet 0644 root:root 'KUBELET_EXTRA_ARGS=--node-labels=node.oscar.dev/pool=workers
'
oscar_text /etc/sysctl.d/99-kubernetes.conf 0644 root:root 'net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
net.ipv4.ip_forward = 1
'
oscar_text /var/lib/kubelet/config.yaml 0600 root:root 'apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
clusterDNS:
  - 10.96.0.10
clusterDomain: cluster.local
rotateCertificates: true
serverTLSBootstrap: true
'
oscar_text /etc/systemd/system/containerd.service.d/10-oscar-cri.conf 0644 root:root '# Written by oscar from spec.cri.
[Service]
Environment=CONTAINERD_CONFIG=/etc/containerd/config.toml
Delegate=yes
Restart=always
RestartSec=5
'
oscar_text /etc/systemd/system/containerd.service.d/10-oscar.conf 0644 root:root '[Service]
LimitNOFILE=1048576
TasksMax=infinity
'
oscar_text /etc/systemd/system/kubelet.service 0644 root:root '[Unit]
Description=kubelet: The Kubernetes Node Agent
Wants=network-online.target containerd.service
After=network-online.target containerd.service

[Service]
EnvironmentFile=-/etc/default/kubelet
ExecStart=/usr/bin/kubelet \
  --config=/var/lib/kubelet/config.yaml \
  --kubeconfig=/etc/kubernetes/kubelet.conf \
  $KUBELET_EXTRA_ARGS
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
'
oscar_text /etc/systemd/system/kubelet.service.d/20-bootstrap.conf 0644 root:root '[Service]
Environment=KUBELET_BOOTSTRAP_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf
'

# oscar_packages NAME[=VERSION]...: installs packages with the OS package manager, under the
# OS's usual umask: the files and directories maintainer scripts make must not come out private
oscar_packages() (
  umask 022
  DEBIAN_FRONTEND=noninteractive apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Options::=--force-confold -o APT::Cmd::Pattern-Only=true "$@"
)
if [ -z "$ROOT" ]; then
  oscar_packages containerd kubelet=1.31.2-1.1
fi

if [ -n "$ROOT" ]; then
  systemctl --root="$ROOT" enable containerd.service kubelet.service systemd-sysctl.service
else
  systemctl daemon-reload
  systemctl enable containerd.service kubelet.service systemd-sysctl.service
  systemctl start containerd.service
  systemctl start kubelet.service
  systemctl restart systemd-sysctl.service
fi
echo "oscar: done"
