/**
 * The actions a plan is made of, and how they read: the planner (agent/plan.ts) emits them, the
 * executor (agent/apply.ts), the journal and systemd run them, `oscar plan` and the agent's logs
 * print them.
 */
import { compare } from '../../api/resolve.js';
import type { ResolvedPackage } from '../../api/resolved.js';
import { formatMode, packageSpec } from '../../api/resolved.js';

export type UnitActionKind =
  | 'unmask'
  | 'mask'
  | 'enable'
  | 'disable'
  | 'start'
  | 'stop'
  | 'restart'
  | 'tryRestart'
  | 'reload'
  | 'stopStart';

export type Action =
  | {
      kind: 'writeFile';
      path: string;
      content: Buffer;
      mode: number;
      user: string;
      group: string;
      /** Set for unit files and drop-ins: the unit they belong to. */
      unit?: string;
      reason: string;
    }
  | { kind: 'removeFile'; path: string; unit?: string; reason: string }
  | { kind: 'installPackages'; packages: ResolvedPackage[]; reason: string }
  | { kind: 'daemonReload'; reason: string }
  | { kind: UnitActionKind; unit: string; reason: string };

export type UnitAction = Extract<Action, { unit: string; kind: UnitActionKind }>;

/** Actions that end the unit's running process and start a new one. */
export const RESTARTING: ReadonlySet<string> = new Set(['restart', 'tryRestart', 'stopStart']);

export function isUnitAction(action: Action): action is UnitAction {
  return (
    action.kind !== 'writeFile' &&
    action.kind !== 'removeFile' &&
    action.kind !== 'daemonReload' &&
    action.kind !== 'installPackages'
  );
}

/** The units a plan restarts (ends and starts again), for reports and tests. */
export function restartedUnits(actions: readonly Action[]): string[] {
  return [
    ...new Set(
      actions
        .filter((a) => isUnitAction(a) && RESTARTING.has(a.kind))
        .map((a) => (a as UnitAction).unit),
    ),
  ].sort(compare);
}

const VERBS: Record<Action['kind'], string> = {
  writeFile: 'write',
  removeFile: 'remove',
  installPackages: 'install',
  daemonReload: 'daemon-reload',
  unmask: 'unmask',
  mask: 'mask',
  enable: 'enable',
  disable: 'disable',
  start: 'start',
  stop: 'stop',
  restart: 'restart',
  tryRestart: 'try-restart',
  reload: 'reload',
  stopStart: 'stop+start',
};

export function describeAction(a: Action): string {
  switch (a.kind) {
    case 'writeFile':
      return `${VERBS[a.kind]} ${a.path} (${formatMode(a.mode)} ${a.user}:${a.group}, ${a.content.length} B)`;
    case 'removeFile':
      return `${VERBS[a.kind]} ${a.path}`;
    case 'installPackages':
      return `${VERBS[a.kind]} ${a.packages.map(packageSpec).join(' ')}`;
    case 'daemonReload':
      return VERBS[a.kind];
    default:
      return `${VERBS[a.kind]} ${a.unit}`;
  }
}

/** The plan as text, one action a line with its reason. */
export function formatPlan(actions: readonly Action[]): string {
  if (actions.length === 0) return 'nothing to do: the node matches the desired state\n';
  const lines = actions.map(
    (a, i) => `${String(i + 1).padStart(3)}. ${describeAction(a)} — ${a.reason}`,
  );
  const restarted = restartedUnits(actions);
  const summary = `${actions.length} action(s)${restarted.length > 0 ? `; restarts ${restarted.join(', ')}` : '; restarts nothing'}`;
  return `${lines.join('\n')}\n${summary}\n`;
}
