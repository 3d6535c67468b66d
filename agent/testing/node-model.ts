/**
 * An in-memory model of a node (files, enablement, masks, running units, restart counts) that
 * the planner's property tests apply plans to. It follows systemctl's semantics for each action
 * closely enough to check that a plan reaches the desired state; it is not used by the agent.
 */
import type { ResolvedConfig } from '../../api/resolved.js';
import { unitPath } from '../../api/resolved.js';
import { enablability, enablement } from '../../api/systemd/enablement.js';
import type { ObservedUnit } from '../model/observed.js';
import type { Action, ObservedDisk, ObservedFile } from '../plan.js';
import { entriesOf } from '../plan.js';

export interface NodeModel {
  files: Map<string, ObservedFile & { content: Buffer; user: string; group: string }>;
  enabled: Set<string>;
  masked: Set<string>;
  active: Set<string>;
  /** Units systemd knows: declared at some point, or acted on. */
  known: Set<string>;
  /** Times each unit's process was ended and started again. */
  restarts: Map<string, number>;
  reloads: Map<string, number>;
  daemonReloads: number;
}

/** A node exactly as `config` leaves it (plus `extraFiles` oscar did not write). */
export function nodeFrom(
  config: ResolvedConfig | undefined,
  extraFiles: Record<string, string> = {},
): NodeModel {
  const node: NodeModel = {
    files: new Map(),
    enabled: new Set(),
    masked: new Set(),
    active: new Set(),
    known: new Set(),
    restarts: new Map(),
    reloads: new Map(),
    daemonReloads: 0,
  };
  for (const [path, content] of Object.entries(extraFiles)) {
    node.files.set(path, {
      content: Buffer.from(content),
      mode: 0o644,
      user: 'root',
      group: 'root',
    });
  }
  for (const e of entriesOf(config).values()) {
    node.files.set(e.path, { content: e.content, mode: e.mode, user: e.user, group: e.group });
  }
  for (const u of config?.units ?? []) {
    node.known.add(u.name);
    if (u.mask) node.masked.add(u.name);
    if (enablement(u).enable) node.enabled.add(u.name);
    if (u.enable && !u.mask && u.command !== 'stop') node.active.add(u.name);
  }
  return node;
}

/** What the planner observes on the model: its files and, as systemctl would say it, its units. */
export function diskOf(node: NodeModel): ObservedDisk {
  const units = new Map<string, ObservedUnit>();
  for (const name of node.known) units.set(name, unitOf(node, name));
  return { files: new Map(node.files), units };
}

/** As systemctl says it: a unit file whose [Install] section gives enable nothing to do. */
function isStatic(node: NodeModel, name: string): boolean {
  const content = node.files.get(unitPath(name))?.content.toString();
  if (content === undefined) return false;
  const prefix = `${unitPath(name)}.d/`;
  const dropIns = [...node.files]
    .filter(([path]) => path.startsWith(prefix))
    .map(([path, f]) => ({ name: path.slice(prefix.length), content: f.content.toString() }));
  return !enablability({ name, content, dropIns }).enable;
}

function unitOf(node: NodeModel, name: string): ObservedUnit {
  const masked = node.masked.has(name);
  return {
    load: masked ? 'masked' : 'loaded',
    active: node.active.has(name) ? 'active' : 'inactive',
    sub: node.active.has(name) ? 'running' : 'dead',
    fileState: masked
      ? 'masked'
      : node.enabled.has(name)
        ? 'enabled'
        : isStatic(node, name)
          ? 'static'
          : 'disabled',
    result: 'success',
    restsInactive: false,
  };
}

const bump = (m: Map<string, number>, k: string): void => {
  m.set(k, (m.get(k) ?? 0) + 1);
};

export function applyToModel(node: NodeModel, actions: readonly Action[]): void {
  for (const a of actions) {
    if ('unit' in a && a.unit !== undefined) node.known.add(a.unit);
    switch (a.kind) {
      case 'writeFile':
        node.files.set(a.path, { content: a.content, mode: a.mode, user: a.user, group: a.group });
        break;
      case 'removeFile':
        node.files.delete(a.path);
        break;
      case 'daemonReload':
        node.daemonReloads++;
        break;
      case 'enable':
        node.enabled.add(a.unit);
        break;
      case 'disable':
        node.enabled.delete(a.unit);
        break;
      case 'mask':
        node.masked.add(a.unit);
        break;
      case 'unmask':
        node.masked.delete(a.unit);
        break;
      case 'start':
        if (node.masked.has(a.unit)) throw new Error(`start of masked ${a.unit}`);
        node.active.add(a.unit);
        break;
      case 'stop':
        node.active.delete(a.unit);
        break;
      case 'restart':
      case 'stopStart':
        if (node.masked.has(a.unit)) throw new Error(`${a.kind} of masked ${a.unit}`);
        node.active.add(a.unit);
        bump(node.restarts, a.unit);
        break;
      case 'tryRestart':
        if (node.active.has(a.unit)) bump(node.restarts, a.unit);
        break;
      case 'reload':
        // reload-or-restart: starts an inactive unit
        node.active.add(a.unit);
        bump(node.reloads, a.unit);
        break;
    }
  }
}
