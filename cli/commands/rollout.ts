/**
 * `oscar rollout status|pause|resume|undo OSC`, as `kubectl rollout` does for Deployments:
 * - status prints status.rollout (with --watch: until it completes, exit 0, or pauses on
 *   failures or times out, exit 1);
 * - pause sets spec.rollout.paused; resume clears it and writes a new oscar.dev/resume
 *   annotation, which also ends a canary pause and retries failed nodes;
 * - undo sets spec.rollout.rollback: every node goes back to the stable revision (or
 *   --to-revision) while the OSC still renders the revision undone.
 * Each command is one JSON merge patch of the OSC (or a read): what a person with `kubectl patch`
 * rights on the OSC may do anyway.
 */
import type { OperatingSystemConfigStatus, RolloutStatus } from '../../api/schema.js';
import { ANNOTATION_RESUME } from '../../api/secret.js';
import { CONTENT_MERGE_PATCH, isNotFound, type KubeHttp } from '../../kube/client.js';
import { loadKubeCredentials, kubeHttp } from '../../kube/credentials.js';

export interface RolloutFlags {
  namespace: string;
  kubeconfig?: string;
  context?: string;
  watch?: boolean;
  timeout?: string;
  toRevision?: string;
}

interface OscView {
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  spec: { purpose?: string; rollout?: { paused?: boolean } };
  status?: OperatingSystemConfigStatus;
}

const path = (ns: string, name: string): string =>
  `/apis/oscar.dev/v1alpha1/namespaces/${encodeURIComponent(ns)}/operatingsystemconfigs/${encodeURIComponent(name)}`;

async function client(flags: RolloutFlags): Promise<KubeHttp> {
  return kubeHttp(await loadKubeCredentials(flags.kubeconfig, flags.context));
}

async function getOsc(http: KubeHttp, ns: string, name: string): Promise<OscView> {
  let osc: OscView;
  try {
    osc = await http.request<OscView>('GET', path(ns, name));
  } catch (error) {
    if (isNotFound(error)) {
      throw new Error(`OperatingSystemConfig ${ns}/${name} not found`, { cause: error });
    }
    throw error;
  }
  if (osc.spec.purpose !== 'reconcile') {
    throw new Error(
      `${ns}/${name} has purpose ${osc.spec.purpose ?? '?'}: only reconcile OSCs roll out`,
    );
  }
  return osc;
}

function patch(http: KubeHttp, ns: string, name: string, body: unknown): Promise<unknown> {
  return http.request('PATCH', path(ns, name), { body, contentType: CONTENT_MERGE_PATCH });
}

/**
 * Why there is no status.rollout: the controller has not processed the OSC (none runs, or it
 * does not watch the namespace), or it has, and no node follows the OSC in grant mode — a rollout
 * is made of grants, and a grant needs a node that asks for one.
 */
function noRollout(
  ns: string,
  name: string,
  status: OperatingSystemConfigStatus | undefined,
): string {
  if (status?.observedGeneration === undefined) {
    return `${ns}/${name}: no rollout yet: no controller has processed this OSC (is one running, and watching namespace ${ns}?)\n`;
  }
  const secret = status.secretRef?.name;
  return `${ns}/${name}: no rollout yet: the controller rendered it${secret ? ` (Secret ${secret})` : ''}, and no node follows it in grant mode (oscar agent --osc ${name}); nodes on --secret take each rendering at once\n`;
}

/** status.rollout as a few lines a person reads at a glance. */
export function formatRollout(
  ns: string,
  name: string,
  r: RolloutStatus | undefined,
  status?: OperatingSystemConfigStatus,
): string {
  if (!r) return noRollout(ns, name, status);
  const n = r.nodes;
  const lines = [
    `${ns}/${name}: revision ${String(r.revision)}${r.stableRevision !== undefined && r.stableRevision !== r.revision ? ` (stable ${String(r.stableRevision)})` : ''} — ${r.phase}${r.pauseReason ? ` (${r.pauseReason})` : ''}`,
    `  nodes: ${String(n.updated)}/${String(n.total)} updated, ${String(n.updating)} updating, ${String(n.failed)} failed (${String(n.rolledBack)} rolled back${n.rollingBack ? `, ${String(n.rollingBack)} rebooting back` : ''}), ${String(n.pending)} pending`,
    `  wave ${String(r.wave)} of ${String(r.waves)}; maxUnavailable ${String(r.maxUnavailable)}, failure threshold ${String(r.failureThreshold)}`,
    `  ${r.message}`,
  ];
  if (r.revisions?.length) {
    lines.push(
      `  revisions kept: ${r.revisions.map((v) => `${String(v.revision)} (${v.checksumShort})`).join(', ')}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function duration(text: string): number {
  const m = /^(\d+)(s|m|h)?$/.exec(text);
  if (!m?.[1]) throw new Error(`--timeout "${text}": write a duration such as 90s, 10m or 1h`);
  const unit = m[2] ?? 's';
  return Number(m[1]) * (unit === 'h' ? 3_600_000 : unit === 'm' ? 60_000 : 1000);
}

export async function rolloutStatus(name: string, flags: RolloutFlags): Promise<number> {
  const http = await client(flags);
  const deadline = Date.now() + duration(flags.timeout ?? '10m');
  let last = '';
  for (;;) {
    const osc = await getOsc(http, flags.namespace, name);
    const r = osc.status?.rollout;
    const text = formatRollout(flags.namespace, name, r, osc.status);
    if (text !== last) process.stdout.write(text);
    last = text;
    if (flags.watch !== true) return r?.pauseReason === 'FailureThreshold' ? 1 : 0;
    if (r?.phase === 'Complete') return 0;
    if (r?.pauseReason === 'FailureThreshold') {
      process.stderr.write('the rollout paused on failures; see `kubectl get oscnode`\n');
      return 1;
    }
    if (Date.now() > deadline) {
      process.stderr.write(`timed out after ${flags.timeout ?? '10m'}\n`);
      return 1;
    }
    await new Promise((r2) => setTimeout(r2, 2000));
  }
}

export async function rolloutPause(name: string, flags: RolloutFlags): Promise<number> {
  const http = await client(flags);
  await getOsc(http, flags.namespace, name);
  await patch(http, flags.namespace, name, { spec: { rollout: { paused: true } } });
  process.stdout.write(`${flags.namespace}/${name}: rollout paused\n`);
  return 0;
}

export async function rolloutResume(name: string, flags: RolloutFlags): Promise<number> {
  const http = await client(flags);
  await getOsc(http, flags.namespace, name);
  await patch(http, flags.namespace, name, {
    metadata: { annotations: { [ANNOTATION_RESUME]: new Date().toISOString() } },
    spec: { rollout: { paused: null } },
  });
  process.stdout.write(`${flags.namespace}/${name}: rollout resumed\n`);
  return 0;
}

export async function rolloutUndo(name: string, flags: RolloutFlags): Promise<number> {
  const http = await client(flags);
  const osc = await getOsc(http, flags.namespace, name);
  const r = osc.status?.rollout;
  const rendered = r?.revisions?.find((v) => v.checksumShort === osc.status?.checksumShort);
  if (!r || !rendered) {
    throw new Error(`${flags.namespace}/${name} has no rollout to undo yet`);
  }
  const kept = (r.revisions ?? []).map((v) => v.revision);
  let to: number | undefined;
  if (flags.toRevision !== undefined) {
    to = Number(flags.toRevision);
    if (!Number.isInteger(to) || !kept.includes(to)) {
      throw new Error(`--to-revision ${flags.toRevision}: revisions kept are ${kept.join(', ')}`);
    }
  } else {
    to =
      r.stableRevision !== undefined && r.stableRevision !== rendered.revision
        ? r.stableRevision
        : kept.filter((k) => k < rendered.revision).sort((a, b) => b - a)[0];
  }
  if (to === undefined || to === rendered.revision) {
    throw new Error(
      `${flags.namespace}/${name}: no earlier revision than ${String(rendered.revision)} is kept`,
    );
  }
  await patch(http, flags.namespace, name, {
    spec: { rollout: { rollback: { fromRevision: rendered.revision, toRevision: to } } },
  });
  process.stdout.write(
    `${flags.namespace}/${name}: every node goes back to revision ${String(to)} (undoing ${String(rendered.revision)}; a new rendering of the OSC ends the undo)\n`,
  );
  return 0;
}
