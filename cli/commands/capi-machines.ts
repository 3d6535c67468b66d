/**
 * `oscar capi preview --machine-deployment MD TEMPLATE`: for each Machine of a MachineDeployment,
 * whether Cluster API (v1.13, RuntimeSDK + InPlaceUpdates) will update it in place through oscar
 * or replace it, were the MachineDeployment's bootstrap configRef moved to TEMPLATE.
 *
 * Cluster API decides per MachineSet, not per Machine: a Machine leaves its (old) MachineSet either
 * by being moved to the new one and updated in place, or by being deleted for a new one. The steps
 * below follow its rollout planner (internal/controllers/machinedeployment: MachineTemplateUpToDate,
 * canUpdateMachineSetInPlace, matchesMachineSet); the bootstrap part is answered by
 * `canUpdateMachineSet` (controller/extension/can-update.ts) — the very function the extension
 * answers Cluster API with — and its patch is applied and compared as Cluster API does.
 */
import { isDeepStrictEqual } from 'node:util';
import { BOOTSTRAP_GROUP } from '../../api/bootstrap/constants.js';
import { canUpdateMachineSet } from '../../controller/extension/can-update.js';
import type { HookObject, JsonPatchOp, WirePatch } from '../../controller/extension/hooks.js';
import type { ReconcileStates } from '../../controller/extension/reconcile-state.js';

export interface Ref {
  apiGroup?: string;
  kind?: string;
  name?: string;
}

/** The part of a Machine's (or a MachineSet's template's) spec the decision reads. */
export interface MachineSpecView {
  bootstrap?: { configRef?: Ref; dataSecretName?: string };
  infrastructureRef?: Ref;
  version?: string;
  failureDomain?: string;
}

export interface CapiObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    deletionTimestamp?: string;
    ownerReferences?: { kind: string; name: string; controller?: boolean }[];
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export type Decision = 'in-place' | 'replace' | 'unchanged';

export interface MachinePreview {
  machine: string;
  machineSet?: string;
  /** The reconcile OSC the Machine's OscarConfig names now. */
  reconcileRef?: string;
  node?: string;
  decision: Decision;
  reason: string;
}

export interface MachineDeploymentPreview {
  namespace: string;
  machineDeployment: string;
  template: string;
  machines: MachinePreview[];
}

/** Reads from the cluster: a narrow seam so the decision is tested without one. */
export interface CapiReader {
  machineDeployment(namespace: string, name: string): Promise<CapiObject>;
  machineSets(namespace: string, md: string): Promise<CapiObject[]>;
  machines(namespace: string, md: string): Promise<CapiObject[]>;
  /** An object a ref names (a template, an OscarConfig); undefined when it does not exist. */
  byRef(namespace: string, ref: Ref): Promise<CapiObject | undefined>;
}

interface Verdict {
  decision: Decision;
  reason: string;
}

export function templateSpecOf(obj: { spec?: Record<string, unknown> }): MachineSpecView {
  const template = obj.spec?.template as { spec?: MachineSpecView } | undefined;
  return template?.spec ?? {};
}

function refText(ref: Ref | undefined): string {
  return ref?.name ? `${ref.kind ?? '?'} ${ref.name}` : 'none';
}

function sameRef(a: Ref | undefined, b: Ref | undefined): boolean {
  return a?.apiGroup === b?.apiGroup && a?.kind === b?.kind && a?.name === b?.name;
}

/** The MachineDeployment's template with its bootstrap configRef moved to the new template. */
export function desiredSpec(md: CapiObject, template: string): MachineSpecView {
  const spec = templateSpecOf(md);
  return {
    ...spec,
    bootstrap: {
      configRef: {
        apiGroup: BOOTSTRAP_GROUP,
        kind: 'OscarConfigTemplate',
        name: template,
      },
    },
  };
}

/** Cluster API's MachineTemplateUpToDate: what differs that makes a Machine out of date. */
export function outOfDate(current: MachineSpecView, desired: MachineSpecView): string[] {
  const diffs: string[] = [];
  if ((current.version ?? '') !== (desired.version ?? '')) {
    diffs.push(`spec.version ${current.version ?? 'unset'} → ${desired.version ?? 'unset'}`);
  }
  if (!isDeepStrictEqual(current.bootstrap ?? {}, desired.bootstrap ?? {})) {
    diffs.push(
      `bootstrap ${refText(current.bootstrap?.configRef)} → ${refText(desired.bootstrap?.configRef)}`,
    );
  }
  if (!sameRef(current.infrastructureRef, desired.infrastructureRef)) {
    diffs.push(
      `infrastructure ${refText(current.infrastructureRef)} → ${refText(desired.infrastructureRef)}`,
    );
  }
  if ((current.failureDomain ?? '') !== (desired.failureDomain ?? '')) {
    diffs.push(
      `failureDomain ${current.failureDomain ?? 'unset'} → ${desired.failureDomain ?? 'unset'}`,
    );
  }
  return diffs;
}

/** Applies the JSON Patch of an extension's reply to a copy of `obj`, as Cluster API does. */
export function applyPatch(obj: HookObject, patch: WirePatch | undefined): HookObject {
  const copy = structuredClone(obj) as Record<string, unknown>;
  if (!patch) return copy;
  const ops = JSON.parse(Buffer.from(patch.patch, 'base64').toString('utf8')) as JsonPatchOp[];
  for (const op of ops) {
    const keys = op.path.split('/').slice(1);
    const last = keys.pop();
    if (last === undefined) continue;
    let at = copy;
    for (const k of keys) {
      at[k] ??= {};
      at = at[k] as Record<string, unknown>;
    }
    at[last] = op.value;
  }
  return copy;
}

/** The fields of spec.template.spec that still differ after the patch (Cluster API's compare). */
function remainingDiff(patched: HookObject, desired: HookObject): string[] {
  const a = templateSpecOf(patched) as Record<string, unknown>;
  const b = templateSpecOf(desired) as Record<string, unknown>;
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return keys.filter((k) => !isDeepStrictEqual(a[k], b[k]));
}

/** Why a field oscar does not cover stops an in-place update (docs/cluster-api.md's table). */
function uncovered(field: string): string {
  return field === 'reconcileRef'
    ? 'spec.template.spec.reconcileRef'
    : `spec.template.spec.${field} (written on the machine at its first boot, never applied again)`;
}

function isOscarRef(ref: Ref | undefined): boolean {
  return ref?.apiGroup === BOOTSTRAP_GROUP && ref.kind === 'OscarConfigTemplate';
}

export interface PreviewInput {
  namespace: string;
  md: CapiObject;
  /** The new OscarConfigTemplate (from the cluster or a file). */
  template: CapiObject;
  reader: CapiReader;
  states: ReconcileStates;
}

/** Infrastructure: Cluster API compares the two templates' spec.template.spec; oscar covers none of it. */
async function infraVerdict(
  input: PreviewInput,
  current: MachineSpecView,
  desired: MachineSpecView,
): Promise<Verdict | undefined> {
  const [was, now] = await Promise.all([
    input.reader.byRef(input.namespace, current.infrastructureRef ?? {}),
    input.reader.byRef(input.namespace, desired.infrastructureRef ?? {}),
  ]);
  if (!was || !now) {
    const missing = !was ? current.infrastructureRef : desired.infrastructureRef;
    return {
      decision: 'replace',
      reason: `infrastructure template ${refText(missing)} not found: Cluster API updates in place only when it can read both`,
    };
  }
  if (!isDeepStrictEqual(templateSpecOf(was), templateSpecOf(now))) {
    return {
      decision: 'replace',
      reason: `${now.kind ?? 'the infrastructure template'} ${refText(current.infrastructureRef)} → ${refText(desired.infrastructureRef)} differs in spec.template.spec: not oscar's, Cluster API rolls it out`,
    };
  }
  return undefined;
}

/** The bootstrap part: the extension's own answer, its patch applied and compared. */
async function bootstrapVerdict(
  input: PreviewInput,
  ms: CapiObject,
  current: MachineSpecView,
): Promise<Verdict> {
  const ref = current.bootstrap?.configRef;
  if (!isOscarRef(ref)) {
    return {
      decision: 'replace',
      reason: `its MachineSet's bootstrap is ${refText(ref)}, not an OscarConfigTemplate: oscar updates nothing in place`,
    };
  }
  const was = await input.reader.byRef(input.namespace, ref ?? {});
  if (!was) {
    return {
      decision: 'replace',
      reason: `its MachineSet's ${refText(ref)} not found: Cluster API cannot compare, so it replaces`,
    };
  }
  let detail: string | undefined;
  const reply = await canUpdateMachineSet(
    {
      current: { machineSet: ms, bootstrapConfigTemplate: was },
      desired: { bootstrapConfigTemplate: input.template },
    },
    input.states,
    (d) => (detail = d),
  );
  const patched = applyPatch(was, reply.bootstrapConfigTemplatePatch);
  const left = remainingDiff(patched, input.template);
  const why = `${reply.message ?? ''}${detail ? `: ${detail}` : ''}`;
  if (left.length === 0) return { decision: 'in-place', reason: why };
  return {
    decision: 'replace',
    reason: `${why}; not covered: ${left.map(uncovered).join(', ')}`,
  };
}

/** One MachineSet's verdict (every Machine of it shares it). */
export async function machineSetVerdict(input: PreviewInput, ms: CapiObject): Promise<Verdict> {
  const current = templateSpecOf(ms);
  const desired = desiredSpec(input.md, input.template.metadata.name);
  const diffs = outOfDate(current, desired);
  if (diffs.length === 0) {
    return {
      decision: 'unchanged',
      reason: `its MachineSet already uses ${refText(desired.bootstrap?.configRef)}`,
    };
  }
  const strategy = (input.md.spec?.rollout as { strategy?: { type?: string } } | undefined)
    ?.strategy?.type;
  if (strategy === 'OnDelete') {
    return {
      decision: 'replace',
      reason:
        'the MachineDeployment rolls out OnDelete: Cluster API replaces a Machine when you delete it, never in place',
    };
  }
  const notOscars = diffs.filter((d) => !d.startsWith('bootstrap ') && !d.startsWith('infra'));
  if (notOscars.length > 0) {
    return {
      decision: 'replace',
      reason: `${notOscars.join(', ')}: not oscar's, Cluster API rolls it out`,
    };
  }
  const infra = await infraVerdict(input, current, desired);
  return infra ?? bootstrapVerdict(input, ms, current);
}

function controllerOf(obj: CapiObject, kind: string): string | undefined {
  return obj.metadata.ownerReferences?.find((o) => o.kind === kind && o.controller !== false)?.name;
}

/** What the Machine's own OscarConfig names now (shown, not decided on: Cluster API decides per MachineSet). */
async function reconcileRefOf(
  input: PreviewInput,
  machine: CapiObject,
): Promise<string | undefined> {
  const ref = (machine.spec as MachineSpecView | undefined)?.bootstrap?.configRef;
  if (ref?.kind !== 'OscarConfig') return undefined;
  const config = await input.reader.byRef(input.namespace, ref);
  return (config?.spec?.reconcileRef as { name?: string } | undefined)?.name;
}

/** Every Machine of the MachineDeployment, by name, with its MachineSet's verdict. */
export async function previewMachines(input: PreviewInput): Promise<MachinePreview[]> {
  const name = input.md.metadata.name;
  const [sets, machines] = await Promise.all([
    input.reader.machineSets(input.namespace, name),
    input.reader.machines(input.namespace, name),
  ]);
  const byName = new Map(sets.map((s) => [s.metadata.name, s]));
  const verdicts = new Map<string, Promise<Verdict>>();
  const out: MachinePreview[] = [];
  for (const machine of [...machines].sort((a, b) =>
    a.metadata.name.localeCompare(b.metadata.name),
  )) {
    const msName = controllerOf(machine, 'MachineSet');
    const ms = msName === undefined ? undefined : byName.get(msName);
    let verdict: Verdict;
    if (machine.metadata.deletionTimestamp) {
      verdict = { decision: 'unchanged', reason: 'being deleted: Cluster API updates it no more' };
    } else if (!ms || msName === undefined) {
      verdict = {
        decision: 'unchanged',
        reason: 'no MachineSet of this MachineDeployment owns it: its rollout does not touch it',
      };
    } else {
      if (!verdicts.has(msName)) verdicts.set(msName, machineSetVerdict(input, ms));
      verdict = await (verdicts.get(msName) as Promise<Verdict>);
    }
    const reconcileRef = await reconcileRefOf(input, machine);
    const node = (machine.status?.nodeRef as { name?: string } | undefined)?.name;
    out.push({
      machine: machine.metadata.name,
      ...(msName === undefined ? {} : { machineSet: msName }),
      ...(reconcileRef === undefined ? {} : { reconcileRef }),
      ...(node === undefined ? {} : { node }),
      ...verdict,
    });
  }
  return out;
}
