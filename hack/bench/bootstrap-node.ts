/**
 * From container boot to Applied=True, over several boots of a blank machine (docs/identity.md):
 * each boot is a fresh OscarConfig and a fresh overlay of the cached Debian root (no Node.js, no
 * oscar file), seeded with the machine's user data; real cloud-init fetches the agent's single
 * executable from a loopback HTTP server, the agent gets its certificate from the controller's
 * approver (in this process) and kube-controller-manager, and applies the reconcile OSC. Prints
 * per boot: boot → agent installed, → certificate approved, → Applied=True; then p50 / min / max,
 * the artifact's and the user data's sizes, and the agent's start time and peak RSS on the node.
 *
 *   flock /tmp/oscar-heavy.lock flock /tmp/oscar-e2e.lock timeout 1200 nice -n 10 \
 *     node --import tsx hack/bench/bootstrap-node.ts [--boots 5]
 *
 * Attaches to $OSCAR_TESTENV_STATE when set, else starts (and stops) a test cluster.
 */
import { execFileSync } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildAgent } from '../agent/build.js';
import { attachCluster, kubeOps } from '../../test/support/cluster.js';
import { runBootstrapController, serveAgent } from '../../test/support/agent-server.js';
import { bootNode } from '../../test/support/nspawn.js';
import { nodeRoot, repoRoot } from '../../test/support/tools.js';
import { sleep } from '../../api/util.js';

const { values } = parseArgs({ options: { boots: { type: 'string', default: '5' } } });
const boots = Number(values.boots);

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

async function main(): Promise<void> {
  const lower = nodeRoot();
  if (!lower) throw new Error('no node root (run hack/node-root/build.sh as root)');
  const cluster = await attachCluster({});
  const { env, api } = cluster;
  const { apply, get } = kubeOps(api, 'bench');
  execFileSync(env.info.kubectlPath, [
    '--kubeconfig',
    env.kubeconfigPath,
    'apply',
    '-k',
    join(repoRoot, 'deploy', 'identity'),
  ]);
  const agent = await buildAgent({ log: () => undefined });
  const server = await serveAgent(agent.path);
  const agentUrl = server.url;
  const ns = `bench-bn-${process.pid.toString(36)}`;
  const oscs = `/apis/oscar.dev/v1alpha1/namespaces/${ns}/operatingsystemconfigs`;
  await apply(`/api/v1/namespaces/${ns}`, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: ns },
  });
  const osc = (name: string, spec: Record<string, unknown>) =>
    apply(`${oscs}/${name}`, {
      apiVersion: 'oscar.dev/v1alpha1',
      kind: 'OperatingSystemConfig',
      metadata: { name, namespace: ns },
      spec,
    });
  await osc('prov', { type: 'debian', purpose: 'provision' });
  await osc('rec', {
    type: 'debian',
    purpose: 'reconcile',
    files: [{ path: '/etc/app/a.conf', content: { inline: { data: 'a\n' } } }],
    units: [
      {
        name: 'app.service',
        filePaths: ['/etc/app/a.conf'],
        content:
          '[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=multi-user.target\n',
      },
    ],
  });
  const controller = await runBootstrapController({
    env,
    namespace: ns,
    agentUrl,
    agentSha256: agent.sha256,
  });
  let checksum: string | undefined;
  for (let i = 0; i < 600 && !checksum; i++) {
    checksum = (await get<{ status?: { checksum?: string } }>(`${oscs}/rec`))?.status?.checksum;
    if (!checksum) await sleep(100);
  }
  const rows: { install: number; identity: number; applied: number; rssKiB: number }[] = [];
  let userDataBytes = 0;
  try {
    for (let i = 0; i < boots; i++) {
      const machine = `bn${process.pid.toString(36)}-${String(i)}`;
      await apply(`/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${ns}/oscarconfigs/${machine}`, {
        apiVersion: 'bootstrap.oscar.dev/v1alpha1',
        kind: 'OscarConfig',
        metadata: { name: machine, namespace: ns },
        spec: { provisionRef: { name: 'prov' }, reconcileRef: { name: 'rec' } },
      });
      let userData = '';
      for (let t = 0; t < 600 && !userData; t++) {
        const s = await get<{ data?: { value?: string } }>(
          `/api/v1/namespaces/${ns}/secrets/${machine}`,
        );
        userData = Buffer.from(s?.data?.value ?? '', 'base64').toString('utf8');
        if (!userData) await sleep(100);
      }
      userDataBytes = Buffer.byteLength(userData);
      const t0 = Date.now();
      const node = await bootNode({ root: lower, name: machine, seed: { userData } });
      const row = { install: NaN, identity: NaN, applied: NaN, rssKiB: NaN };
      try {
        const deadline = t0 + 300_000;
        while (Date.now() < deadline) {
          if (Number.isNaN(row.install)) {
            const st = await stat(node.hostPath('/opt/oscar/bin/oscar-agent')).catch(
              () => undefined,
            );
            if (st) row.install = Date.now() - t0;
          }
          if (Number.isNaN(row.identity)) {
            const st = await stat(node.hostPath('/var/lib/oscar/pki/node.pem')).catch(
              () => undefined,
            );
            if (st) row.identity = Date.now() - t0;
          }
          const r = await get<{
            status?: { appliedChecksum?: string; conditions?: { type: string; status: string }[] };
          }>(`/apis/oscar.dev/v1alpha1/operatingsystemconfignodes/${machine}`);
          if (
            r?.status?.appliedChecksum === checksum &&
            r?.status?.conditions?.some((c) => c.type === 'Applied' && c.status === 'True')
          ) {
            row.applied = Date.now() - t0;
            break;
          }
          await sleep(100);
        }
        const { MainPID } = await node.show('oscar-agent.service', ['MainPID']);
        const status = await node.exec(['cat', `/proc/${MainPID ?? '0'}/status`]);
        row.rssKiB = Number(/VmHWM:\s+(\d+)/.exec(status.stdout)?.[1] ?? NaN);
      } finally {
        await node.stop();
      }
      rows.push(row);
      process.stdout.write(
        `boot ${String(i + 1)}: agent installed ${String(row.install)} ms, certificate ${String(row.identity)} ms, Applied=True ${String(row.applied)} ms, agent peak RSS ${String(row.rssKiB)} KiB\n`,
      );
    }
  } finally {
    await controller.stop();
    await server.close();
    execFileSync(env.info.kubectlPath, [
      '--kubeconfig',
      env.kubeconfigPath,
      'delete',
      'namespace',
      ns,
      '--wait=false',
    ]);
    await cluster.stop();
  }
  const t = (f: (r: (typeof rows)[number]) => number): string => {
    const xs = rows.map(f).filter((x) => Number.isFinite(x));
    return `p50 ${String(pct(xs, 50))} ms, min ${String(Math.min(...xs))} ms, max ${String(Math.max(...xs))} ms (${String(xs.length)}/${String(rows.length)} boots)`;
  };
  const startRuns: number[] = [];
  for (let i = 0; i < 5; i++) {
    const s = performance.now();
    execFileSync(agent.path, ['version']);
    startRuns.push(Math.round(performance.now() - s));
  }
  process.stdout.write(
    [
      `artifact: ${String(agent.bytes)} bytes (${(agent.bytes / 2 ** 20).toFixed(1)} MiB), sha256 ${agent.sha256}`,
      `user data (cloud-config, debian, empty provision OSC + additions): ${String(userDataBytes)} bytes`,
      `agent start (\`oscar-agent version\` on the host): p50 ${String(pct(startRuns, 50))} ms`,
      `boot → agent installed: ${t((r) => r.install)}`,
      `boot → certificate stored: ${t((r) => r.identity)}`,
      `boot → Applied=True: ${t((r) => r.applied)}`,
      `agent peak RSS on the node: ${t((r) => r.rssKiB).replaceAll(' ms', ' KiB')}`,
    ].join('\n') + '\n',
  );
  process.exit(0);
}

main().catch((error: unknown) => {
  process.stderr.write(`bootstrap-node bench: ${String((error as Error).stack ?? error)}\n`);
  process.exit(1);
});
