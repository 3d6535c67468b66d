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
import { displayName, readInput } from '../support/input.js';
import { parseOutputFormat, printStructured } from '../support/output.js';

export interface CapiPreviewFlags {
  namespace: string;
  kubeconfig?: string;
  context?: string;
  output?: string;
  detailedExitcode?: boolean;
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
    const { kubeHttp, loadKubeCredentials } = await import('../../kube/credentials.js');
    cluster ??= new KubeReconcileStates(
      kubeHttp(await loadKubeCredentials(flags.kubeconfig, flags.context)),
    );
    return cluster;
  });
  const result = await preview(flags.namespace, from, to, states);
  io.stdout(output ? printStructured(result, output) : format(result));
  return flags.detailedExitcode === true && result.decision === 'replace'
    ? EXIT_REPLACE
    : EXIT_IN_PLACE;
}

/** `oscar capi preview` (flags in ./index.ts). */
export async function capiPreviewCommand(
  from: string,
  to: string,
  flags: CapiPreviewFlags,
): Promise<void> {
  process.exitCode = await runCapiPreview(from, to, flags, {
    stdout: (text) => process.stdout.write(text),
  });
}
