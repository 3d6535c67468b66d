// Helpers of the renderer apply-for-real tests (test/e2e/renderers-apply.test.ts): what a
// rendering must leave in a root (files, mask and enable symlinks), owner lookup in a root, and
// cloud-init's own YAML loader. The overlays (appliers, and a script run over the node root)
// come from test/support/overlay.ts.
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ResolvedConfig } from '../../api/resolved.js';
import { parseUnitFile, valuesAfterReset } from '../../api/systemd/unit-file.js';
import type { Format } from '../../api/schema.js';
import { expectedOutcome } from '../../renderers/formats.js';
import { run } from '../support/exec.js';
import type { Tree, TreeEntry } from '../support/overlay.js';
import { systemPython } from '../support/validators.js';

export interface Ids {
  users: Map<string, number>;
  groups: Map<string, number>;
}

async function idMap(file: string): Promise<Map<string, number>> {
  const map = new Map<string, number>();
  for (const line of (await readFile(file, 'utf8')).split('\n')) {
    const [name, , id] = line.split(':');
    if (name && id !== undefined) map.set(name, Number(id));
  }
  return map;
}

/** The user and group databases of a root ("/" for the host). */
export async function idsOf(root: string): Promise<Ids> {
  return {
    users: await idMap(join(root, 'etc/passwd')),
    groups: await idMap(join(root, 'etc/group')),
  };
}

function lookup(map: Map<string, number>, name: string): number {
  if (/^[0-9]+$/.test(name)) return Number(name);
  const id = map.get(name);
  if (id === undefined) throw new Error(`no id for "${name}"`);
  return id;
}

/**
 * Units that ship with the OS (no content) may not exist in the test root, where enabling them
 * would fail for a reason that has nothing to do with the renderer: there they are not enabled.
 */
export function forTestRoot(config: ResolvedConfig): ResolvedConfig {
  const units = config.units.map((u) => (u.content === undefined ? { ...u, enable: false } : u));
  // spec.cri adds containerd.service (from the OS); declaring it disabled keeps that decision
  if (config.cri && !units.some((u) => u.name === 'containerd.service')) {
    units.push({
      name: 'containerd.service',
      enable: false,
      mask: false,
      command: 'restart',
      onChange: 'restart',
      dropIns: [],
      filePaths: [],
    });
    units.sort((a, b) => (a.name < b.name ? -1 : 1));
  }
  return { ...config, units };
}

/**
 * What applying the rendering of an (expanded) config must leave in the root: every file with
 * its bytes, mode and owner, `/dev/null` symlinks for masked units and a `.wants` symlink per
 * WantedBy= of each enabled unit.
 */
export function expectedTree(config: ResolvedConfig, format: Format, ids: Ids): Tree {
  const outcome = expectedOutcome(config, format);
  const tree: Tree = new Map();
  for (const f of outcome.files) {
    const entry: TreeEntry = {
      type: 'file',
      mode: f.mode,
      uid: lookup(ids.users, f.user),
      gid: lookup(ids.groups, f.group),
      bytes: f.content,
    };
    tree.set(f.path, entry);
  }
  const link = (linkTarget: string): TreeEntry => ({
    type: 'symlink',
    mode: 0o777,
    uid: 0,
    gid: 0,
    linkTarget,
  });
  for (const name of outcome.mask) tree.set(`/etc/systemd/system/${name}`, link('/dev/null'));
  for (const name of outcome.enable) {
    const unit = config.units.find((u) => u.name === name);
    if (unit?.content === undefined) continue;
    const parsed = [unit.content, ...unit.dropIns.map((d) => d.content)].map(parseUnitFile);
    const wantedBy = parsed.flatMap((p) =>
      valuesAfterReset(p, 'Install', 'WantedBy').flatMap((v) => v.split(/\s+/)),
    );
    for (const target of new Set(wantedBy)) {
      tree.set(`/etc/systemd/system/${target}.wants/${name}`, link(`/etc/systemd/system/${name}`));
    }
  }
  return tree;
}

const loaderScript = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'renderers',
  'testdata',
  'cloudinit-load.py',
);

/** Loads cloud-config texts with cloud-init's own loader (one python process for all). */
export async function cloudInitLoad(texts: readonly string[]): Promise<Record<string, unknown>[]> {
  const input = texts.map((text, id) => JSON.stringify({ id, text })).join('\n') + '\n';
  const r = await run(systemPython, [loaderScript], { input, timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`cloud-init loader failed: ${r.stderr}`);
  const docs: Record<string, unknown>[] = [];
  for (const line of r.stdout.trim().split('\n')) {
    const msg = JSON.parse(line) as { id: number; doc?: Record<string, unknown>; error?: string };
    if (msg.error !== undefined) throw new Error(`document ${msg.id}: ${msg.error}`);
    docs[msg.id] = msg.doc ?? {};
  }
  return docs;
}
