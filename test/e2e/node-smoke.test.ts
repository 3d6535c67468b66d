// Smoke test of the node e2e machinery itself: a real systemd boots the cached Debian root in
// systemd-nspawn, real cloud-init consumes a NoCloud seed, and the node is torn down completely.
// If this fails, every other node e2e test would fail for reasons unrelated to oscar.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stat } from 'node:fs/promises';
import { run } from '../support/exec.js';
import {
  bootNode,
  nodeInits,
  nodeRuntimeBind,
  readNodeFile,
  uniqueNodeName,
  type Node,
} from '../support/nspawn.js';
import { nodeSuiteGate } from '../support/tools.js';
import { waitFor } from '../support/wait.js';

const userData = `#cloud-config
locale: C.UTF-8
write_files:
  - path: /etc/oscar-smoke/marker
    content: "hello from cloud-init\\n"
    permissions: "0640"
  - path: /etc/systemd/system/oscar-smoke.service
    permissions: "0644"
    content: |
      [Unit]
      Description=oscar smoke service
      [Service]
      ExecStart=/bin/sleep infinity
      [Install]
      WantedBy=multi-user.target
runcmd:
  # --no-block: runcmd runs inside cloud-final.service, which boot is still waiting for
  - [systemctl, enable, --now, --no-block, oscar-smoke.service]
`;

let node: Node | undefined;
let skipReason: string | undefined;
const timings: Record<string, number> = {};

beforeAll(async () => {
  const gate = nodeSuiteGate(['systemd-nspawn', 'nsenter', 'pgrep']);
  if (gate.skip !== undefined) {
    skipReason = gate.skip;
    return;
  }
  const root = gate.root;
  const t0 = performance.now();
  node = await bootNode({
    root,
    name: uniqueNodeName('smoke'),
    seed: { userData },
    binds: [nodeRuntimeBind()],
  });
  timings.systemdUp = performance.now() - t0;
  await node.waitRunning();
  timings.running = performance.now() - t0;
  await node.waitCloudInit();
  timings.cloudInitDone = performance.now() - t0;
});

afterAll(async () => {
  await node?.stop();
  if (Object.keys(timings).length > 0) {
    const figures = Object.entries(timings).map(([k, v]) => `${k}=${(v / 1000).toFixed(2)}s`);
    console.log(`node-smoke timings since spawn: ${figures.join(' ')}`);
  }
});

describe('node smoke (systemd-nspawn + cloud-init NoCloud)', () => {
  it('boots to "running" with no failed units', async (ctx) => {
    if (node === undefined) return ctx.skip(skipReason);
    const state = await node.systemctl('is-system-running');
    expect(state.stdout.trim()).toBe('running');
    const failed = await node.systemctl('--failed', '--no-legend', '--plain');
    expect(failed.stdout.trim()).toBe('');
  });

  it('cloud-init reports done, from the NoCloud seed', async (ctx) => {
    if (node === undefined) return ctx.skip(skipReason);
    const status = await node.execOk(['cloud-init', 'status', '--long']);
    expect(status.stdout).toMatch(/^status: done$/m);
    const ds = await node.execOk(['cloud-init', 'query', 'platform']);
    expect(ds.stdout.trim()).toBe('nocloud');
    // meta-data's local-hostname (bootNode's default: the machine name), not the build host's name
    const hostname = await node.execOk(['hostname']);
    expect(hostname.stdout.trim()).toBe(node.name);
  });

  it('write_files created the file with the requested mode and content', async (ctx) => {
    if (node === undefined) return ctx.skip(skipReason);
    const st = await stat(node.hostPath('/etc/oscar-smoke/marker'));
    expect(st.isFile()).toBe(true);
    expect((st.mode & 0o7777).toString(8)).toBe('640');
    expect(st.uid).toBe(0);
    expect(await readNodeFile(node, '/etc/oscar-smoke/marker')).toBe('hello from cloud-init\n');
  });

  it('the service enabled by user-data is running with a main PID', async (ctx) => {
    if (node === undefined) return ctx.skip(skipReason);
    const booted = node;
    // the start job was queued with --no-block; give it until it settles (a wait, not a timing check)
    const props = await waitFor(
      'oscar-smoke.service to leave activating/inactive',
      async () => {
        const p = await booted.show('oscar-smoke.service', [
          'ActiveState',
          'MainPID',
          'UnitFileState',
        ]);
        return p.ActiveState !== 'activating' && p.ActiveState !== 'inactive' ? p : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    expect(props.ActiveState).toBe('active');
    expect(props.UnitFileState).toBe('enabled');
    expect(Number(props.MainPID)).toBeGreaterThan(0);
    const comm = await node.execOk(['cat', `/proc/${props.MainPID ?? ''}/comm`]);
    expect(comm.stdout.trim()).toBe('sleep');
  });

  it('runs the host Node.js runtime bound into the node', async (ctx) => {
    if (node === undefined) return ctx.skip(skipReason);
    const r = await node.execOk(['/usr/local/bin/node', '-e', 'console.log(process.version)']);
    expect(r.stdout.trim()).toBe(process.version);
  });

  it('stop() halts the node and leaves no process behind', async (ctx) => {
    if (node === undefined) return ctx.skip(skipReason);
    const n = node;
    expect(n.processes().length).toBeGreaterThan(1); // systemd, journald, sleep, ...
    expect(nodeInits(n.name)).toEqual([n.systemdPid]);
    const t0 = performance.now();
    await n.stop();
    timings.stop = performance.now() - t0;
    expect(n.processes()).toEqual([]);
    expect(nodeInits(n.name)).toEqual([]);
    expect(() => process.kill(n.pid, 0)).toThrow();
    expect(() => process.kill(n.systemdPid, 0)).toThrow();
    node = undefined;
  });
});

describe('node without cloud-init', () => {
  it('boots to running with cloud-init disabled', async (ctx) => {
    const { root, skip } = nodeSuiteGate(['systemd-nspawn', 'nsenter', 'pgrep']);
    if (skip !== undefined) return ctx.skip(skip);
    const t0 = performance.now();
    const n = await bootNode({
      root,
      name: uniqueNodeName('smoke-nocloud'),
      disableCloudInit: true,
    });
    try {
      expect(await n.waitRunning()).toBe('running');
      console.log(
        `node-smoke without cloud-init: running after ${((performance.now() - t0) / 1000).toFixed(2)}s`,
      );
      const status = await n.exec(['cloud-init', 'status']);
      expect(status.stdout.trim()).toBe('status: disabled');
      expect((await n.systemctl('is-active', 'cloud-init.service')).stdout.trim()).toBe('inactive');
    } finally {
      await n.stop();
    }
  });
});

describe('node boot failure', () => {
  it('waitRunning rejects on a degraded node, naming the failed unit and its journal', async (ctx) => {
    const { root, skip } = nodeSuiteGate(['systemd-nspawn', 'nsenter', 'pgrep']);
    if (skip !== undefined) return ctx.skip(skip);
    const broken = [
      '#cloud-config',
      'locale: C.UTF-8',
      'write_files:',
      '  - path: /etc/systemd/system/oscar-broken.service',
      '    content: |',
      '      [Service]',
      '      ExecStart=/bin/sh -c "echo oscar-broken-says-bye; exit 3"',
      'runcmd:',
      '  - [systemctl, start, --no-block, oscar-broken.service]',
      '',
    ].join('\n');
    const n = await bootNode({
      root,
      name: uniqueNodeName('smoke-degraded'),
      seed: { userData: broken },
    });
    try {
      const err = await n.waitRunning().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(Error);
      const message = (err as Error).message;
      expect(message).toContain("settled in state 'degraded'");
      expect(message).toContain('oscar-broken.service');
      expect(message).toContain('oscar-broken-says-bye');
    } finally {
      await n.stop();
    }
    expect(nodeInits(n.name)).toEqual([]);
  });

  it('a boot that does not come up in time is torn down, leaving no process', async (ctx) => {
    const { root, skip } = nodeSuiteGate(['systemd-nspawn', 'nsenter', 'pgrep']);
    if (skip !== undefined) return ctx.skip(skip);
    const name = uniqueNodeName('smoke-timeout');
    await expect(bootNode({ root, name, startTimeoutMs: 1 })).rejects.toThrow(
      /did not come up in time/,
    );
    const left = await run('pgrep', ['-f', `-M ${name} `]);
    expect(left.stdout).toBe(''); // no systemd-nspawn
    expect(nodeInits(name)).toEqual([]); // and no orphaned container (its init outlives nspawn)
  });
});
