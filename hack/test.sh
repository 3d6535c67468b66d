#!/usr/bin/env bash
# `npm test`: every suite oscar has, on a fresh machine of this kind. It installs and builds what
# the suites need first (each step is cached and fast when already done):
#   Debian packages (validators, systemd-nspawn), kube-apiserver + etcd built from Go modules,
#   a debootstrapped Debian root for real-systemd tests, then lint, unit, integration and e2e tests.
# Extra arguments go to every vitest run as filters (e.g. `npm test -- api/` runs only tests under api/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }
started=$SECONDS

step "Debian packages (hack/deps.sh)"
bash hack/deps.sh

step "test API server and node binaries: kube-apiserver, etcd, kubectl, kubelet, kubeadm from Go modules (hack/testenv/build.sh --node; the first build takes long)"
bash hack/testenv/build.sh --node

step "Cluster API core manager from its Go module (hack/capi/build.sh; the first build takes ~3-12 min)"
bash hack/capi/build.sh

step "clusterctl from the same Cluster API module (hack/capi/build-clusterctl.sh; the clusterctl test)"
bash hack/capi/build-clusterctl.sh >/dev/null

step "node root for real-systemd tests (hack/node-root/build.sh; the first build takes ~3 min)"
bash hack/node-root/build.sh

step "build (tsc)"
npm run -s build

step "the agent's single executable (npm run build:agent; the node e2e downloads it)"
npm run -s build:agent >/dev/null

step "lint (eslint, prettier)"
npx eslint .
npx prettier --check . >/dev/null || { npx prettier --check .; exit 1; }

# One vitest run per rung of the ladder: the unit tests never wait for the test cluster (vitest
# starts every selected project's global setup before any test), and a failure in one rung does
# not hide the others' results.
reports="$(mktemp -d -t oscar-vitest.XXXXXX)"
trap 'rm -rf "$reports"' EXIT
status=0
failed_rungs=()
# With a filter, a rung may have nothing to run; without one, every rung must run tests.
extra=()
[[ $# -gt 0 ]] && extra=(--passWithNoTests)
for project in unit integration e2e; do
  step "tests: $project"
  npx vitest run --project "$project" --reporter=default --reporter=json \
    --outputFile.json="$reports/$project.json" "${extra[@]}" "$@" || { status=$?; failed_rungs+=("$project"); }
done

# One plain closing line that any CI can read, summed from vitest's own JSON reports.
node -e '
  const fs = require("fs");
  let passed = 0, failed = 0, skipped = 0;
  const [failedRungs, ...files] = process.argv.slice(1);
  for (const f of files) {
    if (!fs.existsSync(f)) { console.log(`no report: ${f}`); continue; }
    const r = JSON.parse(fs.readFileSync(f, "utf8"));
    passed += r.numPassedTests; failed += r.numFailedTests; skipped += r.numPendingTests + r.numTodoTests;
    // A rung that failed before any test ran (a global setup error, no test files) still counts.
    const rung = f.replace(/.*\//, "").replace(/\.json$/, "");
    if (failedRungs.split(" ").includes(rung) && r.numFailedTests === 0) failed += Math.max(1, r.numFailedTestSuites);
  }
  for (const rung of failedRungs.split(" ").filter(Boolean)) {
    if (!files.some((f) => f.endsWith(`/${rung}.json`) && fs.existsSync(f))) failed++;
  }
  console.log(`\n${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
' "${failed_rungs[*]:-}" "$reports/unit.json" "$reports/integration.json" "$reports/e2e.json" || true
echo "(npm test took $((SECONDS - started)) s)"
exit "$status"
