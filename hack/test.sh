#!/usr/bin/env bash
# `npm test`: every suite oscar has, on a fresh machine of this kind. It installs and builds what
# the suites need first (each step is cached and fast when already done):
#   Debian packages (validators, systemd-nspawn), kube-apiserver + etcd built from Go modules,
#   a debootstrapped Debian root for real-systemd tests, then lint, unit, integration and e2e tests.
# Extra arguments go to vitest (e.g. `npm test -- --project unit`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }
started=$SECONDS

step "Debian packages (hack/deps.sh)"
bash hack/deps.sh

step "test API server: kube-apiserver, etcd, kubectl from Go modules (hack/testenv/build.sh; the first build takes long)"
bash hack/testenv/build.sh

step "node root for real-systemd tests (hack/node-root/build.sh; the first build takes ~3 min)"
bash hack/node-root/build.sh

step "build (tsc)"
npm run -s build

step "lint (eslint, prettier)"
npx eslint .
npx prettier --check . >/dev/null || { npx prettier --check .; exit 1; }

step "tests (vitest: unit, integration, e2e)"
report="$(mktemp -t oscar-vitest.XXXXXX.json)"
trap 'rm -f "$report"' EXIT
status=0
npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@" || status=$?

# One plain closing line that any CI can read, from vitest's own JSON report.
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const skipped = r.numPendingTests + r.numTodoTests;
  console.log(`\n${r.numPassedTests} passed, ${r.numFailedTests} failed` + (skipped ? `, ${skipped} skipped` : ""));
' "$report" || true
echo "(npm test took $((SECONDS - started)) s)"
exit "$status"
