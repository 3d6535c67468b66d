/**
 * The grant a node's agent reads from its OperatingSystemConfigNode (spec.revision), checked
 * field by field before anything acts on it: the agent runs as root and the object is input
 * like any other. A grant must name this agent's own namespace, an OSC there, and one of that
 * OSC's revision Secrets (or its reconcile Secret); its health checks must be what the CRD allows
 * (an absolute program, a port on loopback, bounded timeouts). Plain code: the agent loads no
 * schema library. A grant naming another OSC than the agent's --osc moves the node to that OSC:
 * Cluster API's in-place update does that when a machine's OscarConfig names a new reconcile OSC
 * (controller/extension/). Only the controller writes a node's spec, and the agent's RBAC names
 * the Secrets it may read, so this widens nothing the agent can reach.
 */
import { ROLLOUT_LIMITS } from '../../api/constants.js';
import { ROLLOUT_DEFAULTS } from '../../api/rollout.js';
import { revisionSecretName, secretNameFor } from '../../api/secret.js';
import { isObj } from '../../api/util.js';

interface CheckTiming {
  timeoutMs: number;
  periodMs: number;
  /** Consecutive failures that end the try at once. */
  failureThreshold: number;
}

export interface ExecCheck extends CheckTiming {
  name: string;
  kind: 'exec';
  command: string[];
}

export interface HttpCheck extends CheckTiming {
  name: string;
  kind: 'httpGet';
  port: number;
  path: string;
  scheme: 'HTTP' | 'HTTPS';
}

export type Check = ExecCheck | HttpCheck;

export interface TryPolicy {
  soakMs: number;
  deadlineMs: number;
  checks: Check[];
}

export interface Grant {
  /** metadata.generation of the node object: a new grant, a new generation. */
  generation: number;
  /** The OSC whose rendering this is (the agent's own, or the one Cluster API moves it to). */
  osc: string;
  number: number;
  secretName: string;
  checksum: string;
  grantedTime: string;
  canary: boolean;
  /** Absent: apply plainly (the first revision, an undo, a node that joins). */
  try?: TryPolicy;
}

/** Which grant this is: a revision's checksum at a generation of the node object. */
export function grantKey(grant: Pick<Grant, 'checksum' | 'generation'>): string {
  return `${grant.checksum}@${String(grant.generation)}`;
}

export class GrantError extends Error {
  override name = 'GrantError';
}

function int(v: unknown, what: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new GrantError(`${what} must be a whole number from ${String(min)} to ${String(max)}`);
  }
  return v;
}

function str(v: unknown, what: string, max = 253): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > max) {
    throw new GrantError(`${what} must be a string of 1 to ${String(max)} characters`);
  }
  return v;
}

function check(raw: unknown, i: number): Check {
  const at = `spec.revision.try.healthChecks[${String(i)}]`;
  if (!isObj(raw)) throw new GrantError(`${at} must be a mapping`);
  const name = str(raw.name, `${at}.name`, 63);
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
    throw new GrantError(`${at}.name must be a DNS label`);
  }
  const timeoutMs =
    int(
      raw.timeoutSeconds ?? ROLLOUT_DEFAULTS.healthCheck.timeoutSeconds,
      `${at}.timeoutSeconds`,
      1,
      300,
    ) * 1000;
  const periodMs =
    int(
      raw.periodSeconds ?? ROLLOUT_DEFAULTS.healthCheck.periodSeconds,
      `${at}.periodSeconds`,
      1,
      300,
    ) * 1000;
  const failureThreshold = int(
    raw.failureThreshold ?? ROLLOUT_DEFAULTS.healthCheck.failureThreshold,
    `${at}.failureThreshold`,
    1,
    100,
  );
  const timing = { timeoutMs, periodMs, failureThreshold };
  const exec = raw.exec;
  const http = raw.httpGet;
  if ((exec === undefined) === (http === undefined)) {
    throw new GrantError(`${at} must set exactly one of exec, httpGet`);
  }
  if (exec !== undefined) {
    if (!isObj(exec) || !Array.isArray(exec.command)) {
      throw new GrantError(`${at}.exec.command must be a list`);
    }
    const command = exec.command.map((a, j) =>
      typeof a === 'string' && a.length <= 4096 && !a.includes('\0')
        ? a
        : (() => {
            throw new GrantError(`${at}.exec.command[${String(j)}] must be a string`);
          })(),
    );
    if (command.length === 0 || command.length > ROLLOUT_LIMITS.commandArgs) {
      throw new GrantError(
        `${at}.exec.command must have 1 to ${String(ROLLOUT_LIMITS.commandArgs)} items`,
      );
    }
    if (!command[0]?.startsWith('/')) {
      throw new GrantError(`${at}.exec.command[0] must be an absolute path`);
    }
    return { name, kind: 'exec', command, ...timing };
  }
  if (!isObj(http)) throw new GrantError(`${at}.httpGet must be a mapping`);
  const port = int(http.port, `${at}.httpGet.port`, 1, 65535);
  const path = http.path ?? ROLLOUT_DEFAULTS.healthCheck.path;
  if (typeof path !== 'string' || !/^\/[^\s]*$/.test(path) || path.length > 1024) {
    throw new GrantError(`${at}.httpGet.path must start with "/" and hold no spaces`);
  }
  const scheme = http.scheme ?? ROLLOUT_DEFAULTS.healthCheck.scheme;
  if (scheme !== 'HTTP' && scheme !== 'HTTPS') {
    throw new GrantError(`${at}.httpGet.scheme must be HTTP or HTTPS`);
  }
  return { name, kind: 'httpGet', port, path, scheme, ...timing };
}

export interface GrantScope {
  namespace: string;
  osc: string;
}

/**
 * The grant of a node object, or undefined when it has none. Throws GrantError, naming the
 * field, for a grant this agent must not follow.
 */
export function parseGrant(node: unknown, scope: GrantScope): Grant | undefined {
  if (!isObj(node)) return undefined;
  const spec = node.spec;
  if (!isObj(spec) || spec.revision === undefined || spec.revision === null) return undefined;
  const r = spec.revision;
  if (!isObj(r)) throw new GrantError('spec.revision must be a mapping');
  const meta = isObj(node.metadata) ? node.metadata : {};
  const generation = int(meta.generation ?? 0, 'metadata.generation', 0, Number.MAX_SAFE_INTEGER);
  if (r.namespace !== scope.namespace) {
    throw new GrantError(
      `spec.revision names namespace ${String(r.namespace)}, but this agent follows OSCs in ${scope.namespace}`,
    );
  }
  const osc = str(r.osc, 'spec.revision.osc');
  const secretName = str(r.secretName, 'spec.revision.secretName');
  const allowed = [
    ...Array.from({ length: ROLLOUT_LIMITS.revisionSlots }, (_, k) => revisionSecretName(osc, k)),
    secretNameFor(osc, 'reconcile'),
  ];
  if (!allowed.includes(secretName)) {
    throw new GrantError(
      `spec.revision.secretName "${secretName}" is not a revision Secret of ${osc} (${allowed[0] ?? ''} …) nor its reconcile Secret`,
    );
  }
  const checksum = str(r.checksum, 'spec.revision.checksum', 64);
  if (!/^[0-9a-f]{64}$/.test(checksum)) {
    throw new GrantError('spec.revision.checksum must be 64 lowercase hex digits (sha256)');
  }
  const grant: Grant = {
    generation,
    osc,
    number: int(r.number, 'spec.revision.number', 1, Number.MAX_SAFE_INTEGER),
    secretName,
    checksum,
    grantedTime: str(r.grantedTime, 'spec.revision.grantedTime', 64),
    canary: r.canary === true,
  };
  if (r.try !== undefined && r.try !== null) {
    const t = r.try;
    if (!isObj(t)) throw new GrantError('spec.revision.try must be a mapping');
    const soakMs = int(t.soakSeconds, 'spec.revision.try.soakSeconds', 0, 24 * 3600) * 1000;
    const deadlineMs =
      int(t.deadlineSeconds, 'spec.revision.try.deadlineSeconds', 1, 24 * 3600) * 1000;
    const raw = t.healthChecks ?? [];
    if (!Array.isArray(raw) || raw.length > ROLLOUT_LIMITS.healthChecks) {
      throw new GrantError(
        `spec.revision.try.healthChecks must be a list of at most ${String(ROLLOUT_LIMITS.healthChecks)}`,
      );
    }
    grant.try = { soakMs, deadlineMs, checks: raw.map(check) };
  }
  return grant;
}
