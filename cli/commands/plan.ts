/**
 * `oscar plan`: a dry run of the agent — what applying a desired config to a root would do, each
 * action with its reason, and for every text file it would write or remove a unified diff against
 * the disk. The exit code can tell "nothing to do" from "changes" (--detailed-exitcode, as
 * terraform plan does), so CI can gate on it.
 */
import { isUtf8 } from 'node:buffer';
import { stat } from 'node:fs/promises';
import { createTwoFilesPatch } from 'diff';
import { observeAndPlan } from '../../agent/apply.js';
import { desiredFromText } from '../../agent/desired.js';
import { depsFor, expandForOs } from '../../agent/local.js';
import {
  describeAction,
  formatPlan,
  restartedUnits,
  type Action,
  type ObservedDisk,
} from '../../agent/plan.js';
import { formatDisruption, planDisruption } from '../../agent/reboot/level.js';
import { rebootRequired } from '../../agent/reboot/required.js';
import { readLastApplied } from '../../agent/state.js';
import { formatMode, packageSpec } from '../../api/resolved.js';
import { displayName, readInput } from '../support/input.js';
import { parseOutputFormat, printStructured, type OutputFormat } from '../support/output.js';

export interface PlanOptions {
  file: string;
  root: string;
  stateDir?: string;
  output?: string;
  detailedExitcode?: boolean;
  /** false with --no-diff. */
  diff?: boolean;
  diffPrivate?: boolean;
}

/** Exit codes of `--detailed-exitcode` (terraform's). */
export const EXIT_NO_CHANGES = 0;
export const EXIT_ERROR = 1;
export const EXIT_CHANGES = 2;

const isText = (b: Buffer): boolean => !b.includes(0) && isUtf8(b);

/** World-readable: what anyone on the node may read may be shown in a CI log too. */
const isPublic = (mode: number): boolean => (mode & 0o004) !== 0;

/**
 * The unified diff of one file action, or a line saying why there is none: binary content, or a
 * file only its owner or group may read (its content may be a credential, and plans end up in CI
 * logs; --diff-private shows it).
 */
export function fileDiff(
  action: Action,
  observed: ObservedDisk,
  options: { diffPrivate?: boolean } = {},
): string | undefined {
  if (action.kind !== 'writeFile' && action.kind !== 'removeFile') return undefined;
  const before = observed.files.get(action.path);
  const after = action.kind === 'writeFile' ? action.content : undefined;
  if (before && after && before.content?.equals(after) === true) return undefined; // mode or owner only
  const modes = [before?.mode, action.kind === 'writeFile' ? action.mode : undefined].filter(
    (m): m is number => m !== undefined,
  );
  const hidden = modes.find((m) => !isPublic(m));
  if (hidden !== undefined && options.diffPrivate !== true) {
    return `(content not shown: mode ${formatMode(hidden)} is not world-readable; --diff-private shows it)\n`;
  }
  if (before && before.content === undefined) {
    // the agent never reads a link, a directory, a FIFO or a file too large to be one of oscar's
    return '(current content not read: not a regular file, or larger than a declared file can be)\n';
  }
  const old = before?.content ?? Buffer.alloc(0);
  const next = after ?? Buffer.alloc(0);
  if (!isText(old) || !isText(next)) {
    return `(binary content: ${before ? `${old.length} B` : 'none'} → ${after ? `${next.length} B` : 'removed'})\n`;
  }
  const patch = createTwoFilesPatch(
    before ? action.path : '/dev/null',
    after ? action.path : '/dev/null',
    old.toString('utf8'),
    next.toString('utf8'),
    undefined,
    undefined,
    { context: 3 },
  );
  // the library's "Index:" and "====" header lines say nothing the ---/+++ lines do not
  return patch.slice(patch.indexOf('--- '));
}

function indent(text: string, by: string): string {
  return text
    .split('\n')
    .map((l) => (l === '' ? l : `${by}${l}`))
    .join('\n');
}

/** The plan as text: formatPlan's lines, each file action followed by its diff. */
export function formatPlanWithDiffs(
  actions: readonly Action[],
  observed: ObservedDisk,
  options: { diff?: boolean; diffPrivate?: boolean } = {},
): string {
  const text = formatPlan(actions);
  if (options.diff === false || actions.length === 0) return text;
  const lines = text.split('\n');
  const out: string[] = [];
  lines.forEach((line, i) => {
    out.push(line);
    const action = actions[i];
    const diff = action ? fileDiff(action, observed, options) : undefined;
    if (diff) out.push(indent(diff, '       ').replace(/\n$/, ''));
  });
  return out.join('\n');
}

/** One action as data, for -o json|yaml: what it does, to what, why (no file content). */
function actionData(
  action: Action,
  observed: ObservedDisk,
  options: { diff?: boolean; diffPrivate?: boolean },
): Record<string, unknown> {
  const base = { kind: action.kind, description: describeAction(action), reason: action.reason };
  const diff = options.diff === false ? undefined : fileDiff(action, observed, options);
  switch (action.kind) {
    case 'writeFile':
      return {
        ...base,
        path: action.path,
        mode: formatMode(action.mode),
        owner: `${action.user}:${action.group}`,
        bytes: action.content.length,
        ...(action.unit ? { unit: action.unit } : {}),
        ...(diff ? { diff } : {}),
      };
    case 'removeFile':
      return {
        ...base,
        path: action.path,
        ...(action.unit ? { unit: action.unit } : {}),
        ...(diff ? { diff } : {}),
      };
    case 'installPackages':
      return { ...base, packages: action.packages.map(packageSpec) };
    case 'daemonReload':
      return base;
    default:
      return { ...base, unit: action.unit };
  }
}

export interface PlanIo {
  stdout(text: string): void;
  stderr(line: string): void;
  /** What `-f -` reads (default: the process's stdin). */
  stdin?: NodeJS.ReadableStream;
}

/**
 * A plan compares against a root that exists: a dry run creates nothing, not even the root (the
 * agent would create it; a plan that did so would leave an empty tree behind on every typo).
 */
async function assertRootExists(root: string): Promise<void> {
  const st = await stat(root).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  });
  if (!st) {
    throw new Error(
      `the root ${root} does not exist; a plan creates nothing: make it first (mkdir -p ${root}: an empty root plans everything as new)`,
    );
  }
  if (!st.isDirectory()) throw new Error(`the root ${root} is not a directory`);
}

/** Runs the plan and returns the exit code. */
export async function runPlan(opts: PlanOptions, io: PlanIo): Promise<number> {
  let format: OutputFormat | undefined;
  try {
    format = parseOutputFormat(opts.output);
  } catch (error) {
    io.stderr(`oscar plan: ${(error as Error).message}`);
    return EXIT_ERROR;
  }
  const name = displayName(opts.file);
  let result;
  try {
    const text = await readInput(opts.file, io.stdin);
    const desired = await desiredFromText(text, name, expandForOs, {
      onNote: (line) => {
        io.stderr(line);
      },
    });
    const deps = depsFor(opts);
    await assertRootExists(deps.root);
    const planned = await observeAndPlan(deps, desired);
    const last = await readLastApplied(deps.stateDir);
    const disruption = planDisruption(planned.actions, last?.config, desired.config, {
      rebootRequired: await rebootRequired(deps.root),
    });
    result = { desired, deps, disruption, ...planned };
  } catch (error) {
    io.stderr(`oscar plan: ${(error as Error).message}`);
    return EXIT_ERROR;
  }
  const { desired, deps, actions, observed, disruption } = result;
  const diffOptions = {
    ...(opts.diff === false ? { diff: false } : {}),
    ...(opts.diffPrivate === true ? { diffPrivate: true } : {}),
  };
  if (format) {
    io.stdout(
      printStructured(
        {
          file: name,
          name: desired.name,
          checksum: desired.checksum,
          root: deps.root,
          stateDir: deps.stateDir,
          changes: actions.length > 0,
          actions: actions.map((a) => actionData(a, observed, diffOptions)),
          restarts: restartedUnits(actions),
          disruption,
        },
        format,
      ),
    );
  } else {
    io.stdout(`plan for ${name} (${desired.checksum.slice(0, 12)}) on ${deps.root}:\n`);
    const text = formatPlanWithDiffs(actions, observed, diffOptions);
    io.stdout(text.endsWith('\n') ? text : `${text}\n`);
    io.stdout(`${formatDisruption(disruption)}\n`);
  }
  if (opts.detailedExitcode === true && actions.length > 0) return EXIT_CHANGES;
  return EXIT_NO_CHANGES;
}

/** `oscar plan` (flags in ./index.ts): a dry run of the agent. */
export async function planCommand(opts: PlanOptions): Promise<void> {
  process.exitCode = await runPlan(opts, {
    stdout: (text) => process.stdout.write(text),
    stderr: (line) => {
      console.error(line);
    },
  });
}
