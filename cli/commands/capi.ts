/**
 * `oscar capi preview FROM TO`: before a rollout, whether Cluster API will update a machine in
 * place through oscar or replace it, when its reconcileRef moves from one reconcile OSC to
 * another — answered by `reconcileCoverage` (controller/extension/can-update.ts), the very
 * function the Runtime Extension answers CanUpdateMachine(Set) with, so the preview and the
 * rollout cannot disagree. FROM and TO are OSC files (rendered here as the controller renders
 * them) or OSCs in the cluster (their reconcile Secrets, read as the extension reads them).
 */
import { existsSync } from 'node:fs';
import { desiredFromText } from '../../agent/desired.js';
import { expandForOs } from '../../agent/local.js';
import { reconcileCoverage } from '../../controller/extension/can-update.js';
import {
  KubeReconcileStates,
  type ReconcileLookup,
  type ReconcileStates,
} from '../../controller/extension/reconcile-state.js';
import { secretNameFor } from '../../api/secret.js';
import { parse as parseYaml } from 'yaml';
import { BOOTSTRAP_GROUP } from '../../api/bootstrap/constants.js';
import type { KubeHttp } from '../../kube/client.js';
import { displayName, readInput } from '../support/input.js';
import { parseOutputFormat, printStructured } from '../support/output.js';
import {
  previewMachines,
  type CapiObject,
  type CapiReader,
  type MachineDeploymentPreview,
  type MachinePreview,
} from './capi-machines.js';
import { KubeCapiReader } from './capi-reader.js';

export interface CapiPreviewFlags {
  namespace: string;
  kubeconfig?: string;
  context?: string;
  output?: string;
  detailedExitcode?: boolean;
  machineDeployment?: string;
}

export const EXIT_IN_PLACE = 0;
export const EXIT_ERROR = 1;
export const EXIT_REPLACE = 2;

export interface Preview {
  from: string;
  to: string;
  decision: 'in-place' | 'replace' | 'unchanged';
  reason: string;
}

/** A file when one exists at that path (or "-"); otherwise the name of an OSC in the cluster. */
export function isFile(ref: string): boolean {
  return ref === '-' || existsSync(ref);
}

/**
 * The rendering of an OSC file as the extension would see it, named by the file (two versions of
 * one OSC in two files share a metadata.name).
 */
async function fromFile(path: string): Promise<{ name: string; lookup: ReconcileLookup }> {
  const name = displayName(path);
  const desired = await desiredFromText(await readInput(path), name, expandForOs);
  return {
    name,
    lookup: {
      osc: name,
      secretName: secretNameFor(desired.name, 'reconcile'),
      checksum: desired.checksum,
      config: desired.config,
    },
  };
}

/** States of files first, then of the cluster (only when a name is not a file). */
class Lookups implements ReconcileStates {
  constructor(
    private readonly files: ReadonlyMap<string, ReconcileLookup>,
    private readonly cluster: () => Promise<ReconcileStates>,
  ) {}

  async get(namespace: string, osc: string): Promise<ReconcileLookup> {
    return this.files.get(osc) ?? (await this.cluster()).get(namespace, osc);
  }
}

/** The decision of the extension's own function for FROM → TO, as a Preview. */
export async function preview(
  namespace: string,
  from: string,
  to: string,
  states: ReconcileStates,
): Promise<Preview> {
  const coverage = await reconcileCoverage(
    namespace,
    { reconcileRef: { name: from } },
    { reconcileRef: { name: to } },
    states,
  );
  const decision = coverage.reconcileRef ? 'in-place' : from === to ? 'unchanged' : 'replace';
  // The reply to Cluster API says only the verdict; whoever runs the preview may read both OSCs,
  // so it gets the full reason (the extension logs the same).
  const reason = coverage.reconcileRef
    ? `${coverage.message} (checksum ${(coverage.checksum ?? '').slice(0, 12)})`
    : coverage.detail
      ? `not in place: ${coverage.detail}`
      : coverage.message;
  return { from, to, decision, reason };
}

function format(p: Preview): string {
  const what =
    p.decision === 'in-place'
      ? 'updated in place by oscar'
      : p.decision === 'unchanged'
        ? 'unchanged'
        : 'replaced by Cluster API (a new machine)';
  return `${p.from} → ${p.to}: machines are ${what}\n  why: ${p.reason}\n`;
}

async function clusterHttp(flags: CapiPreviewFlags): Promise<KubeHttp> {
  const { kubeHttp, loadKubeCredentials } = await import('../../kube/credentials.js');
  return kubeHttp(await loadKubeCredentials(flags.kubeconfig, flags.context));
}

/** The new OscarConfigTemplate: a file (what you are about to apply) or one in the cluster. */
async function readTemplate(
  ref: string,
  namespace: string,
  reader: CapiReader,
): Promise<CapiObject> {
  if (!isFile(ref)) {
    const found = await reader.byRef(namespace, {
      apiGroup: BOOTSTRAP_GROUP,
      kind: 'OscarConfigTemplate',
      name: ref,
    });
    if (!found) {
      throw new Error(
        `OscarConfigTemplate ${namespace}/${ref} not found: name one in the cluster (-n its namespace) or a file`,
      );
    }
    return found;
  }
  const doc = parseYaml(await readInput(ref)) as Partial<CapiObject> | null;
  if (doc?.kind !== 'OscarConfigTemplate' || !doc.metadata?.name) {
    throw new Error(
      `${displayName(ref)}: expected one OscarConfigTemplate (kind: OscarConfigTemplate, metadata.name), got kind ${String(doc?.kind)}`,
    );
  }
  return { ...doc, metadata: { ...doc.metadata, namespace } };
}

const WHAT: Record<MachinePreview['decision'], string> = {
  'in-place': 'updated in place by oscar',
  replace: 'replaced by Cluster API (a new machine)',
  unchanged: 'unchanged',
};

function formatMachines(p: MachineDeploymentPreview): string {
  const count = (d: MachinePreview['decision']) =>
    p.machines.filter((m) => m.decision === d).length;
  const lines = [
    `MachineDeployment ${p.namespace}/${p.machineDeployment} → OscarConfigTemplate ${p.template}: ${String(count('in-place'))} in place, ${String(count('replace'))} replaced, ${String(count('unchanged'))} unchanged`,
    "  (Cluster API with the RuntimeSDK and InPlaceUpdates feature gates and oscar's extension registered; without them every machine is replaced)",
  ];
  if (p.machines.length === 0) lines.push('  no Machines');
  for (const m of p.machines) {
    const about = [
      m.machineSet && `MachineSet ${m.machineSet}`,
      m.reconcileRef && `reconcile ${m.reconcileRef}`,
      m.node && `node ${m.node}`,
    ].filter(Boolean);
    const parens = about.length > 0 ? ` (${about.join(', ')})` : '';
    lines.push(`${m.machine}${parens}: ${WHAT[m.decision]}`, `  why: ${m.reason}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * `--machine-deployment MD TEMPLATE`: per Machine of MD, were its bootstrap configRef moved to
 * TEMPLATE. The exit code as for two OSCs: 2 (with --detailed-exitcode) when any is replaced.
 */
export async function runMachineDeploymentPreview(
  templateRef: string,
  flags: CapiPreviewFlags & { machineDeployment: string },
  io: { stdout(text: string): void },
  http?: KubeHttp,
): Promise<number> {
  const output = parseOutputFormat(flags.output);
  const api = http ?? (await clusterHttp(flags));
  const reader = new KubeCapiReader(api);
  const namespace = flags.namespace;
  const md = await reader.machineDeployment(namespace, flags.machineDeployment);
  const template = await readTemplate(templateRef, namespace, reader);
  const machines = await previewMachines({
    namespace,
    md,
    template,
    reader,
    states: new KubeReconcileStates(api),
  });
  const result: MachineDeploymentPreview = {
    namespace,
    machineDeployment: md.metadata.name,
    template: template.metadata.name,
    machines,
  };
  io.stdout(output ? printStructured(result, output) : formatMachines(result));
  return flags.detailedExitcode === true && machines.some((m) => m.decision === 'replace')
    ? EXIT_REPLACE
    : EXIT_IN_PLACE;
}

/** Runs the preview; returns the exit code (with --detailed-exitcode: 2 when machines are replaced). */
export async function runCapiPreview(
  fromRef: string,
  toRef: string,
  flags: CapiPreviewFlags,
  io: { stdout(text: string): void },
): Promise<number> {
  const output = parseOutputFormat(flags.output);
  const files = new Map<string, ReconcileLookup>();
  const nameOf = async (ref: string): Promise<string> => {
    if (!isFile(ref)) return ref;
    const { name, lookup } = await fromFile(ref);
    files.set(name, lookup);
    return name;
  };
  const from = await nameOf(fromRef);
  const to = await nameOf(toRef);
  let cluster: ReconcileStates | undefined;
  const states = new Lookups(files, async () => {
    cluster ??= new KubeReconcileStates(await clusterHttp(flags));
    return cluster;
  });
  const result = await preview(flags.namespace, from, to, states);
  io.stdout(output ? printStructured(result, output) : format(result));
  return flags.detailedExitcode === true && result.decision === 'replace'
    ? EXIT_REPLACE
    : EXIT_IN_PLACE;
}

/**
 * `oscar capi preview FROM TO`, or `oscar capi preview --machine-deployment MD TEMPLATE` (flags in
 * ./index.ts): one argument with --machine-deployment, two without.
 */
export async function capiPreviewCommand(
  first: string,
  second: string | undefined,
  flags: CapiPreviewFlags,
): Promise<void> {
  const io = { stdout: (text: string) => process.stdout.write(text) };
  const md = flags.machineDeployment;
  if (md !== undefined) {
    if (second !== undefined) {
      throw new Error(
        `--machine-deployment takes one argument, the new OscarConfigTemplate (got "${first}" and "${second}")`,
      );
    }
    process.exitCode = await runMachineDeploymentPreview(
      first,
      { ...flags, machineDeployment: md },
      io,
    );
    return;
  }
  if (second === undefined) {
    throw new Error(
      'two reconcile OSCs (FROM TO), or --machine-deployment MD and the new OscarConfigTemplate',
    );
  }
  process.exitCode = await runCapiPreview(first, second, flags, io);
}
