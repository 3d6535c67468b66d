/**
 * The rollout policy of a reconcile OperatingSystemConfig (spec.rollout): its defaults, how a
 * count-or-percentage resolves against the number of nodes, and the checks the schema cannot
 * express. Plain code over the schema's types: the controller, the CLI and the agent share it
 * without loading typebox.
 */
import { fieldError, type FieldError } from './field-error.js';
import type { HealthCheck, RolloutPolicy } from './schema.js';
import {
  DEFAULT_DRAIN_TIMEOUT_SECONDS,
  type DrainTimeoutAction,
  type NonDisruptive,
} from './constants.js';
import { isObj, type Obj } from './util.js';

/**
 * Why these defaults (docs/rollouts.md): one node at a time, as OpenShift's MachineConfigPool;
 * the first failure stops the rollout; a node must stay healthy for a minute (a crash loop with
 * systemd's restart back-off shows within that) and gets ten minutes to get there (a container
 * runtime or kubelet restart with image pulls fits).
 */
export const ROLLOUT_DEFAULTS = {
  maxUnavailable: 1,
  canaryNodes: 1,
  soakSeconds: 60,
  progressDeadlineSeconds: 600,
  failureThreshold: 1,
  nonDisruptive: 'Gate' as NonDisruptive,
  healthCheck: {
    timeoutSeconds: 5,
    periodSeconds: 5,
    failureThreshold: 3,
    path: '/',
    scheme: 'HTTP' as const,
  },
};

export type IntOrPercent = number | string;

/** A rollout policy with every default applied; counts still relative to the node count. */
export interface ResolvedPolicy {
  maxUnavailable: IntOrPercent;
  canary?: { nodes: IntOrPercent; pauseSeconds?: number };
  soakSeconds: number;
  progressDeadlineSeconds: number;
  failureThreshold: IntOrPercent;
  paused: boolean;
  nonDisruptive: NonDisruptive;
  healthChecks: HealthCheck[];
  rollback?: { fromRevision: number; toRevision: number };
  drain: { timeoutSeconds: number; onTimeout: DrainTimeoutAction };
}

export function resolvePolicy(policy: RolloutPolicy | undefined): ResolvedPolicy {
  const p = policy ?? {};
  const out: ResolvedPolicy = {
    maxUnavailable: p.maxUnavailable ?? ROLLOUT_DEFAULTS.maxUnavailable,
    soakSeconds: p.soakSeconds ?? ROLLOUT_DEFAULTS.soakSeconds,
    progressDeadlineSeconds: p.progressDeadlineSeconds ?? ROLLOUT_DEFAULTS.progressDeadlineSeconds,
    failureThreshold: p.failureThreshold ?? ROLLOUT_DEFAULTS.failureThreshold,
    paused: p.paused ?? false,
    nonDisruptive: p.nonDisruptive ?? ROLLOUT_DEFAULTS.nonDisruptive,
    healthChecks: p.healthChecks ?? [],
    drain: {
      timeoutSeconds: p.drain?.timeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS,
      onTimeout: p.drain?.onTimeout ?? 'Wait',
    },
  };
  if (p.canary) {
    out.canary = { nodes: p.canary.nodes ?? ROLLOUT_DEFAULTS.canaryNodes };
    if (p.canary.pauseSeconds !== undefined) out.canary.pauseSeconds = p.canary.pauseSeconds;
  }
  if (p.rollback) out.rollback = { ...p.rollback };
  return out;
}

const PERCENT = /^(100|[1-9]?[0-9])%$/;

/**
 * A count or a percentage of `total`, as Kubernetes' intstr: a percentage rounds up or down as
 * asked; the result is at least `min` (and never above total, when total > 0).
 */
export function scaledCount(
  value: IntOrPercent,
  total: number,
  round: 'up' | 'down',
  min = 1,
): number {
  let n: number;
  if (typeof value === 'number') n = value;
  else {
    const m = PERCENT.exec(value);
    if (!m) throw new Error(`"${value}" is not a count or a percentage such as "25%"`);
    const exact = (Number(value.slice(0, -1)) * total) / 100;
    n = round === 'up' ? Math.ceil(exact) : Math.floor(exact);
  }
  n = Math.max(min, n);
  return total > 0 ? Math.min(n, Math.max(total, min)) : n;
}

function intOrPercent(value: unknown, path: string, out: FieldError[], what: string): void {
  if (value === undefined) return;
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 0) {
      out.push(fieldError(path, `must be a whole count of nodes or a percentage such as "25%"`));
    } else if (value === 0) {
      out.push(fieldError(path, `0 ${what}`));
    }
    return;
  }
  if (typeof value === 'string') {
    if (!PERCENT.test(value)) {
      out.push(
        fieldError(
          path,
          `must be a count of nodes or a percentage such as "25%" (got ${JSON.stringify(value)})`,
        ),
      );
    }
    return;
  }
  out.push(fieldError(path, 'must be a count of nodes or a percentage such as "25%"'));
}

function healthCheck(check: unknown, path: string, out: FieldError[]): void {
  if (!isObj(check)) return;
  const sources = ['exec', 'httpGet'].filter((k) => check[k] !== undefined);
  if (sources.length !== 1) {
    out.push(fieldError(path, 'set exactly one of exec, httpGet'));
  }
  const exec = check.exec;
  if (isObj(exec) && Array.isArray(exec.command)) {
    const program: unknown = exec.command[0];
    if (typeof program === 'string' && !program.startsWith('/')) {
      out.push(
        fieldError(
          `${path}.exec.command[0]`,
          `must be an absolute path such as "/usr/bin/curl" (got ${JSON.stringify(program)}): the check runs without a shell and without a PATH search`,
        ),
      );
    }
  }
}

/**
 * The checks of spec.rollout the schema leaves open: count-or-percentage values (the schema
 * cannot type them), a purpose other than reconcile, unique health check names, a rollback to
 * the revision it undoes.
 */
export function validateRolloutPolicy(spec: Obj): FieldError[] {
  const rollout = spec.rollout;
  if (rollout === undefined) return [];
  const out: FieldError[] = [];
  if (spec.purpose !== undefined && spec.purpose !== 'reconcile') {
    out.push(
      fieldError(
        'spec.rollout',
        'applies to purpose reconcile only: a provision config is read once, at first boot; remove spec.rollout',
      ),
    );
  }
  if (!isObj(rollout)) return out;
  intOrPercent(
    rollout.maxUnavailable,
    'spec.rollout.maxUnavailable',
    out,
    'would never update a node; to stop a rollout set spec.rollout.paused: true',
  );
  intOrPercent(
    rollout.failureThreshold,
    'spec.rollout.failureThreshold',
    out,
    'would pause every rollout before it starts; use 1 to pause at the first failure',
  );
  if (isObj(rollout.canary)) {
    intOrPercent(
      rollout.canary.nodes,
      'spec.rollout.canary.nodes',
      out,
      'makes an empty canary wave; remove spec.rollout.canary to have none',
    );
  }
  const soak = rollout.soakSeconds;
  const deadline = rollout.progressDeadlineSeconds ?? ROLLOUT_DEFAULTS.progressDeadlineSeconds;
  if (typeof soak === 'number' && typeof deadline === 'number' && soak >= deadline) {
    out.push(
      fieldError(
        'spec.rollout.soakSeconds',
        `must be below progressDeadlineSeconds (${String(deadline)}): a node could never stay healthy long enough`,
      ),
    );
  }
  if (Array.isArray(rollout.healthChecks)) {
    const seen = new Set<unknown>();
    rollout.healthChecks.forEach((check, i) => {
      const path = `spec.rollout.healthChecks[${String(i)}]`;
      healthCheck(check, path, out);
      if (isObj(check) && check.name !== undefined) {
        if (seen.has(check.name)) {
          out.push(
            fieldError(
              `${path}.name`,
              `${JSON.stringify(check.name)} is used twice; give every check its own name`,
            ),
          );
        }
        seen.add(check.name);
      }
    });
  }
  const rollback = rollout.rollback;
  if (isObj(rollback) && rollback.fromRevision === rollback.toRevision) {
    out.push(
      fieldError(
        'spec.rollout.rollback.toRevision',
        'is the revision being undone; name an earlier one (oscar rollout status lists them)',
      ),
    );
  }
  return out;
}
