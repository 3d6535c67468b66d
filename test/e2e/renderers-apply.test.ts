// Renderings applied FOR REAL into a directory, compared with the declaration byte for byte,
// mode for mode, owner for owner:
// - cloud-config: cloud-init's own write_files module, chrooted in an overlay of the node root;
// - Ignition: the ignition binary's files stage with -root, then systemctl --root preset;
// - script: run with ROOT=DIR and systemctl --root (enable and mask symlinks compared too).
// Plus: every unit and drop-in of the examples passes systemd-analyze verify inside the node
// root, cloud-init's own YAML loader reads generated cloud-configs exactly as oscar's decoder
// does, and generated renderings pass the real validators.
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolve } from '../../api/resolve.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { Format } from '../../api/schema.js';
import { comparable, decodeCloudConfig } from '../../renderers/decode.js';
import { expectedOutcome } from '../../renderers/formats.js';
import { expand } from '../../renderers/profiles.js';
import { defaultRegistry, renderOsc } from '../../renderers/registry.js';
import { configArb } from '../../renderers/testdata/arbitraries.js';
import { loadExamples } from '../../renderers/testdata/golden.js';
import { run } from '../support/exec.js';
import {
  applyCloudConfigWriteFiles,
  applyIgnitionFiles,
  diffTrees,
  ignitionBinary,
  pick,
  runInOverlay,
  snapshotTree,
} from '../support/overlay.js';
import { missing, nodeRoot, requireTool, requireTools } from '../support/tools.js';
import {
  cloudInitSchema,
  ignitionValidate,
  shNoexec,
  shellcheck,
  stopValidators,
} from '../support/validators.js';
import { cloudInitLoad, expectedTree, forTestRoot, idsOf, type Ids } from './renderers-support.js';

const registry = defaultRegistry();
let root: string | undefined;
let rootIds: Ids;
let hostIds: Ids;
let examples: { name: string; config: ResolvedConfig }[] = [];

beforeAll(async () => {
  hostIds = await idsOf('/');
  examples = (await loadExamples()).map(({ name, osc }) => {
    const r = resolve(osc.spec);
    if (!r.ok) throw new Error(`examples/${name}.yaml does not resolve`);
    return { name, config: r.config };
  });
  if (process.getuid?.() !== 0) {
    missing('root', 'the apply tests mount overlays and chown files');
    return;
  }
  root = nodeRoot();
  if (root !== undefined) rootIds = await idsOf(root);
});

afterAll(() => {
  stopValidators();
});

async function render(config: ResolvedConfig, format: Format): Promise<Buffer> {
  return (await renderOsc(registry, config, { name: 'apply', namespace: 'e2e', format })).userData;
}

function samples(
  types: string[],
  n: number,
  seed: number,
  extra: Parameters<typeof configArb>[0] extends infer O ? Partial<O> : never = {},
): ResolvedConfig[] {
  return fc.sample(configArb({ types, maxFiles: 8, maxUnits: 4, ...extra }), { numRuns: n, seed });
}

function forType(configs: { name: string; config: ResolvedConfig }[], types: string[]) {
  return configs.filter((c) => types.includes(c.config.type));
}

/** Only files and symlinks: directories are created on the way and are no part of the promise. */
function changesOf(tree: Parameters<typeof pick>[0]) {
  return pick(tree, ['file', 'symlink']);
}

describe('cloud-config applied by cloud-init write_files', () => {
  // cloud-init resolves owners by name in the root; numeric ids and setuid bits are set by runcmd
  // (which `single` does not run), so those cases are covered by the decoder tests instead.
  const users = ['root', 'daemon', 'nobody', '_apt'];
  const groups = ['root', 'daemon', 'nogroup'];

  it('writes exactly the declared files and units (examples + 12 generated configs)', async (ctx) => {
    if (root === undefined) return ctx.skip('no node root');
    const generated = samples(['ubuntu', 'debian', 'generic'], 12, 4242, { owners: users }).map(
      (c, i) => ({
        name: `generated-${i}`,
        config: {
          ...c,
          files: c.files.map((f) => ({
            ...f,
            mode: f.mode & 0o777,
            group: groups[i % groups.length] ?? 'root',
          })),
        },
      }),
    );
    const cases = [...forType(examples, ['ubuntu', 'debian', 'generic']), ...generated];
    let deferred = 0;
    for (const { name, config } of cases) {
      const userData = (await render(config, 'cloud-config')).toString('utf8');
      deferred += userData.split('\n    defer: true\n').length - 1;
      // write_files, then write_files_deferred (the files owned by anyone but root:root)
      const applied = await applyCloudConfigWriteFiles(userData, { root });
      try {
        const expected = expectedTree(expand(config).config, 'cloud-config', rootIds);
        for (const [path, entry] of expected) if (entry.type === 'symlink') expected.delete(path);
        expect(diffTrees(expected, changesOf(applied.changes)), name).toEqual([]);
      } finally {
        await applied.cleanup();
      }
    }
    // the deferred stage was exercised, not just available
    expect(deferred).toBeGreaterThan(0);
  });
});

describe('Ignition applied by the ignition files stage and systemctl preset', () => {
  it('writes exactly the declared files, units, masks and enablement (examples + 15 generated)', async (ctx) => {
    if (root === undefined || !requireTools([ignitionBinary, 'systemctl']))
      return ctx.skip('no root or ignition');
    const owners = ['root', 'daemon', 'nobody', '0', '1000'];
    const groups = ['root', 'daemon', 'nogroup', '0', '1000'];
    const generated = samples(['flatcar'], 15, 777, {
      owners,
      groups,
      packages: false,
      cri: false,
    }).map((config, i) => ({ name: `generated-${i}`, config }));
    const cases = [...forType(examples, ['flatcar']), ...generated].map((c) => ({
      ...c,
      config: forTestRoot(c.config),
    }));
    for (const { name, config } of cases) {
      const json = (await render(config, 'ignition')).toString('utf8');
      const applied = await applyIgnitionFiles(json, { root });
      try {
        const expected = expectedTree(forTestRoot(expand(config).config), 'ignition', rootIds);
        expect(diffTrees(expected, changesOf(applied.changes)), `${name}\n${applied.log}`).toEqual(
          [],
        );
      } finally {
        await applied.cleanup();
      }
    }
  });
});

describe('script run with ROOT=DIR', () => {
  it('writes exactly the declared files, masks and enable symlinks, and a second run changes nothing', async (ctx) => {
    if (process.getuid?.() !== 0 || !requireTools(['sh', 'systemctl', 'base64'])) {
      return ctx.skip('needs root (chown) and systemctl');
    }
    const owners = ['root', 'daemon', 'nobody', '0', '1000'];
    const groups = ['root', 'daemon', 'nogroup', '0', '1000'];
    const generated = samples(['generic', 'ubuntu', 'flatcar'], 20, 99, {
      owners,
      groups,
      cri: false,
    }).map((c, i) => ({
      name: `generated-${i}`,
      config: { ...c, packages: c.type === 'flatcar' ? [] : c.packages },
    }));
    const cases = [...examples, ...generated].map((c) => ({ ...c, config: forTestRoot(c.config) }));
    for (const { name, config } of cases) {
      const script = await render(config, 'script');
      const dir = await mkdtemp(join(tmpdir(), 'oscar-script-root-'));
      try {
        await writeFile(join(dir, '..', `${dir.split('/').pop() ?? 'x'}.sh`), script);
        const scriptPath = join(dir, '..', `${dir.split('/').pop() ?? 'x'}.sh`);
        const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ROOT: dir, LANG: 'C.UTF-8' };
        const first = await run('sh', [scriptPath], { env, timeoutMs: 60_000 });
        expect(first.code, `${name}: ${first.stdout}${first.stderr}`).toBe(0);
        const expected = expectedTree(forTestRoot(expand(config).config), 'script', hostIds);
        if (config.purpose === 'provision') {
          expected.set('/var/lib/oscar/provisioned', {
            type: 'file',
            mode: 0o600,
            uid: 0,
            gid: 0,
            bytes: Buffer.alloc(0),
          });
        }
        const after = changesOf(await snapshotTree(dir));
        expect(diffTrees(expected, after), name).toEqual([]);
        const second = await run('sh', [scriptPath], { env, timeoutMs: 60_000 });
        expect(second.code, `${name} (second run): ${second.stderr}`).toBe(0);
        expect(diffTrees(after, changesOf(await snapshotTree(dir))), `${name} second run`).toEqual(
          [],
        );
        await rm(scriptPath, { force: true });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
  });
});

describe('example units pass systemd-analyze verify inside the node root', () => {
  it('every unit and drop-in, with drop-ins in place, prints nothing', async (ctx) => {
    if (root === undefined || !requireTool('systemd-analyze')) return ctx.skip('no node root');
    for (const { name, config } of examples) {
      const expanded = expand(config).config;
      const units = expanded.units.filter((u) => !u.mask).map((u) => u.name);
      if (units.length === 0) continue;
      // Files and units are put in place by the example's own script rendering (ROOT=$M). What
      // spec.packages would install cannot be installed offline, so stand-ins take its place:
      // an executable /usr/bin/kubelet and a minimal containerd.service with its binary.
      const script = await render({ ...forTestRoot(config), packages: [] }, 'script');
      const r = await runInOverlay(
        root,
        [
          'ROOT="$M" sh "$W/render.sh" >/dev/null 2>&1',
          `printf '#!/bin/sh\\nexit 0\\n' > "$M/usr/bin/kubelet"; chmod 0755 "$M/usr/bin/kubelet"`,
          `printf '#!/bin/sh\\nexit 0\\n' > "$M/usr/bin/containerd"; chmod 0755 "$M/usr/bin/containerd"`,
          `[ -e "$M/lib/systemd/system/containerd.service" ] || printf '[Unit]\\nDescription=containerd stand-in\\n[Service]\\nExecStart=/usr/bin/containerd\\n[Install]\\nWantedBy=multi-user.target\\n' > "$M/lib/systemd/system/containerd.service"`,
          `exec chroot "$M" env SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no ${units.map((u) => `'${u}'`).join(' ')}`,
        ].join('\n'),
        { 'render.sh': script.toString('utf8') },
      );
      expect(`${r.stdout}${r.stderr}`.trim(), `examples/${name}.yaml: ${units.join(', ')}`).toBe(
        '',
      );
      expect(r.code, name).toBe(0);
    }
  });

  it('and the check is real: a broken unit in the same setup is reported', async (ctx) => {
    if (root === undefined) return ctx.skip('no node root');
    const r = await runInOverlay(
      root,
      [
        `printf '[Service]\\nExecStart=/usr/bin/does-not-exist\\nBogusKey=1\\n' > "$M/etc/systemd/system/broken.service"`,
        'exec chroot "$M" env SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no broken.service',
      ].join('\n'),
    );
    expect(`${r.stdout}${r.stderr}`).toMatch(/BogusKey|does-not-exist/);
  });
});

describe("cloud-init's own YAML loader reads what oscar's decoder reads", () => {
  it('200 generated cloud-configs decode identically through cloudinit.util.load_yaml', async (ctx) => {
    const ok =
      existsSync('/usr/lib/python3/dist-packages/cloudinit') ||
      missing('cloud-init python module', 'run hack/deps.sh');
    if (!ok) return ctx.skip('cloud-init missing');
    const configs = samples(['ubuntu', 'debian', 'opensuse', 'generic'], 200, 2024);
    const rendered = await Promise.all(configs.map((c) => render(c, 'cloud-config')));
    const docs = await cloudInitLoad(rendered.map((b) => b.toString('utf8')));
    rendered.forEach((userData, i) => {
      const config = configs[i];
      if (config === undefined) throw new Error('missing config');
      const viaCloudInit = decodeCloudConfig(userData, () => docs[i] ?? {});
      expect(comparable(viaCloudInit), `config ${i}`).toEqual(
        comparable(expectedOutcome(expand(config).config, 'cloud-config')),
      );
    });
  });
});

describe('generated renderings pass the real validators with no output', () => {
  it('cloud-init schema (40), ignition-validate (20), sh -n + shellcheck (20)', async (ctx) => {
    if (!requireTools(['ignition-validate', 'shellcheck'])) return ctx.skip('validators missing');
    for (const c of samples(['ubuntu', 'generic'], 40, 1)) {
      const text = (await render(c, 'cloud-config')).toString('utf8');
      expect(await cloudInitSchema(text), text.slice(0, 2000)).toBe('');
    }
    for (const c of samples(['flatcar'], 20, 2, { packages: false })) {
      const text = (await render(c, 'ignition')).toString('utf8');
      expect(await ignitionValidate(text), text.slice(0, 2000)).toBe('');
    }
    for (const c of samples(['generic', 'ubuntu'], 20, 3)) {
      const text = (await render(c, 'script')).toString('utf8');
      expect(await shNoexec(text)).toBe('');
      expect(await shellcheck(text), text.slice(0, 2000)).toBe('');
    }
  });
});
