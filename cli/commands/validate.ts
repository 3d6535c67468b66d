/**
 * `oscar validate`: everything the controller would refuse, found before the OSC is applied —
 * the schema and the deep checks, the renderer for spec.type (the built-ins, and the external
 * renderers of --renderers-config, the controller's own file) and the format, and a dry render
 * with the built-in renderer for its warnings (--strict makes them fail, as butane's does).
 * One line per problem, `file:line: field.path: message`, the form editors jump to; or the
 * results as data with -o json|yaml.
 */
import type { Command } from 'commander';
import { fieldError, ValidationError, type FieldError } from '../../api/field-error.js';
import { describeDocument, formatProblem, loadDocuments } from '../../api/load.js';
import { referencedObjects, resolve, type References } from '../../api/resolve.js';
import type { OperatingSystemConfig } from '../../api/schema.js';
import { validateOperatingSystemConfig } from '../../api/validate.js';
import {
  defaultRegistry,
  renderOsc,
  selectRenderer,
  type RendererRegistry,
} from '../../renderers/registry.js';
import { displayName, readInput } from '../support/input.js';
import { parseOutputFormat, printStructured } from '../support/output.js';
import { loadReferences } from '../support/references.js';
import { placeholderContext, substituted, type PlaceholderFlags } from './placeholders.js';

export interface ValidateOptions extends PlaceholderFlags {
  file?: string[];
  strict?: boolean;
  output?: string;
  renderersConfig?: string;
  refDir?: string;
}

export interface Problem {
  line: number;
  path?: string;
  message: string;
}

/** The outcome for one document of one file (or for a file that could not be read). */
export interface DocumentResult {
  file: string;
  /** 1-based position in the file; 0 for a file that could not be read. */
  document: number;
  line: number;
  kind?: string;
  namespace?: string;
  name?: string;
  result: 'valid' | 'invalid' | 'skipped';
  errors: Problem[];
  warnings: Problem[];
  notes: string[];
}

export interface CheckContext {
  registry: RendererRegistry;
  /** Types served by external renderers: accepted, not rendered here. */
  external: ReadonlySet<string>;
  refDir?: string;
  /** What `-f -` reads (default: the process's stdin). */
  stdin?: NodeJS.ReadableStream;
  /** --values, --machine, --cluster, --api-server: provision OSCs are checked substituted. */
  placeholders?: PlaceholderFlags;
}

/**
 * A valid provision OSC, checked again with the placeholder flags substituted (as the controller
 * does for an OscarConfig); without such flags, the OSC as written.
 */
function withPlaceholders(
  osc: OperatingSystemConfig,
  flags: PlaceholderFlags | undefined,
): { osc: OperatingSystemConfig } | { errors: FieldError[] } {
  if (flags === undefined || osc.spec.purpose !== 'provision') return { osc };
  const context = placeholderContext(flags, osc.metadata.namespace ?? 'default');
  if (context === undefined) return { osc };
  const r = substituted(osc, context);
  if ('errors' in r) return r;
  const errors = validateOperatingSystemConfig(r.osc);
  return errors.length > 0 ? { errors } : r;
}

/**
 * The registry `oscar validate` checks spec.type against: the built-ins, plus one stand-in per
 * external renderer of a --renderers-config file (its type and formats; it is never called).
 */
export async function validationRegistry(
  renderersConfig: string | undefined,
): Promise<{ registry: RendererRegistry; external: Set<string> }> {
  const registry = defaultRegistry();
  const external = new Set<string>();
  if (renderersConfig === undefined) return { registry, external };
  const { loadRenderersConfigFile } = await import('../../renderers/webhook/config.js');
  for (const entry of await loadRenderersConfigFile(renderersConfig)) {
    registry.register(
      {
        types: [entry.type],
        formats: entry.formats,
        render: () => Promise.reject(new Error('an external renderer is not called offline')),
      },
      { replace: true },
    );
    external.add(entry.type);
  }
  return { registry, external };
}

function metadataOf(value: unknown): { kind?: string; namespace?: string; name?: string } {
  const o = (typeof value === 'object' && value !== null ? value : {}) as {
    kind?: unknown;
    metadata?: { name?: unknown; namespace?: unknown };
  };
  return {
    ...(typeof o.kind === 'string' ? { kind: o.kind } : {}),
    ...(typeof o.metadata?.namespace === 'string' ? { namespace: o.metadata.namespace } : {}),
    ...(typeof o.metadata?.name === 'string' ? { name: o.metadata.name } : {}),
  };
}

/** What the controller would do with the type, the format and the rendering. */
async function rendererChecks(
  osc: OperatingSystemConfig,
  context: CheckContext,
): Promise<{ errors: FieldError[]; warnings: string[]; notes: string[] }> {
  const selected = selectRenderer(context.registry, osc.spec);
  if ('errors' in selected) {
    return {
      errors: selected.errors.map((e) =>
        e.path === 'spec.type'
          ? fieldError(
              e.path,
              `${e.message.replace(/ \(a provider adds one by registering a renderer\)$/, '')}; an external renderer's type is known with --renderers-config FILE (the controller's file)`,
            )
          : e,
      ),
      warnings: [],
      notes: [],
    };
  }
  if (context.external.has(osc.spec.type)) {
    return { errors: [], warnings: [], notes: [] }; // rendered by its webhook, not here
  }
  const wanted = referencedObjects(osc.spec);
  const referenced = [
    ...[...wanted.secrets].map((n) => `Secret "${n}"`),
    ...[...wanted.configMaps].map((n) => `ConfigMap "${n}"`),
  ];
  let refs: References | undefined;
  if (referenced.length > 0) {
    if (context.refDir === undefined) {
      return {
        errors: [],
        warnings: [],
        notes: [
          `the rendering was not checked: it needs ${referenced.join(', ')}; pass --ref-dir DIR to check it with their data`,
        ],
      };
    }
    const loaded = await loadReferences(osc, context.refDir);
    if (loaded.errors.length > 0) return { errors: loaded.errors, warnings: [], notes: [] };
    refs = loaded.refs;
  }
  const resolved = resolve(osc.spec, refs);
  if (!resolved.ok) return { errors: resolved.errors, warnings: [], notes: [] };
  try {
    const result = await renderOsc(context.registry, resolved.config, {
      name: osc.metadata.name,
      namespace: osc.metadata.namespace ?? 'default',
    });
    return { errors: [], warnings: result.warnings, notes: [] };
  } catch (error) {
    if (error instanceof ValidationError) return { errors: error.errors, warnings: [], notes: [] };
    return { errors: [fieldError('', (error as Error).message)], warnings: [], notes: [] };
  }
}

/** Every document of every file, checked; a file that cannot be read is one invalid result. */
export async function checkFiles(
  files: readonly string[],
  context: CheckContext,
  strict = false,
): Promise<DocumentResult[]> {
  const results: DocumentResult[] = [];
  for (const path of files) results.push(...(await checkFile(path, context, strict)));
  return results;
}

/** One file's results: one per non-empty document, and one more when none is an OSC. */
async function checkFile(
  path: string,
  context: CheckContext,
  strict: boolean,
): Promise<DocumentResult[]> {
  const file = displayName(path);
  let text: string;
  try {
    text = await readInput(path, context.stdin);
  } catch (error) {
    return [fileProblem(file, 0, `cannot read: ${(error as Error).message}`)];
  }
  const docs = loadDocuments(text);
  const results: DocumentResult[] = [];
  for (const doc of docs) {
    if (doc.role === 'empty' && doc.errors.length === 0) continue;
    results.push(await checkDocument(file, doc, context, strict));
  }
  if (!docs.some((d) => d.role === 'osc') && docs.every((d) => d.errors.length === 0)) {
    results.push(
      fileProblem(file, 1, 'holds no OperatingSystemConfig (every document is of another kind)'),
    );
  }
  return results;
}

/** A problem of the whole file (document 0) at one line. */
function fileProblem(file: string, line: number, message: string): DocumentResult {
  return {
    file,
    document: 0,
    line,
    result: 'invalid',
    errors: [{ line, message }],
    warnings: [],
    notes: [],
  };
}

/** One document: broken YAML, another kind (skipped), or an OSC through schema and renderer. */
async function checkDocument(
  file: string,
  doc: ReturnType<typeof loadDocuments>[number],
  context: CheckContext,
  strict: boolean,
): Promise<DocumentResult> {
  const base = { file, document: doc.index, line: doc.line, ...metadataOf(doc.value) };
  if (doc.errors.length > 0) {
    return {
      ...base,
      result: 'invalid',
      errors: doc.errors.map((e) => ({ line: e.line, message: e.message })),
      warnings: [],
      notes: [],
    };
  }
  if (doc.role === 'other') {
    return {
      ...base,
      result: 'skipped',
      errors: [],
      warnings: [],
      notes: [
        `skipping document ${String(doc.index)} (${describeDocument(doc.value)}): not an OperatingSystemConfig`,
      ],
    };
  }
  const located = (e: FieldError): Problem => ({
    line: doc.lineOf(e.path),
    ...(e.path ? { path: e.path } : {}),
    message: e.message,
  });
  const schemaErrors = validateOperatingSystemConfig(doc.value);
  const substitutedOsc =
    schemaErrors.length > 0
      ? { errors: schemaErrors }
      : withPlaceholders(doc.value as OperatingSystemConfig, context.placeholders);
  const checked =
    'errors' in substitutedOsc
      ? { errors: substitutedOsc.errors, warnings: [], notes: [] }
      : await rendererChecks(substitutedOsc.osc, context);
  const warnings = checked.warnings.map((message) => ({ line: doc.line, message }));
  const failed = checked.errors.length > 0 || (strict && warnings.length > 0);
  return {
    ...base,
    result: failed ? 'invalid' : 'valid',
    errors: checked.errors.map(located),
    warnings,
    notes: checked.notes,
  };
}

/** The human form: problems, warnings and notes as `file:line:` lines. */
export function formatResults(results: readonly DocumentResult[], strict: boolean): string[] {
  const lines: string[] = [];
  const perFile = new Map<string, DocumentResult[]>();
  for (const r of results) perFile.set(r.file, [...(perFile.get(r.file) ?? []), r]);
  for (const [file, rs] of perFile) {
    const named = rs.filter((r) => r.document > 0).length > 1;
    for (const r of rs) {
      const index = named && r.document > 0 ? r.document : undefined;
      const prefix =
        index === undefined || r.result === 'skipped' ? '' : `document ${String(index)}: `;
      for (const e of r.errors) {
        lines.push(
          r.document === 0 && e.line === 0
            ? `${file}: ${e.message}`
            : formatProblem(file, e.line, { path: e.path ?? '', message: e.message }, index),
        );
      }
      for (const w of r.warnings) {
        lines.push(
          `${file}:${String(w.line)}: ${strict ? 'error' : 'warning'}: ${prefix}${w.message}${strict ? ' (--strict)' : ''}`,
        );
      }
      for (const n of r.notes) {
        lines.push(`${file}:${String(r.line)}: note: ${prefix}${n}`);
      }
    }
  }
  return lines;
}

/**
 * One line per problem (the corpus test's entry): true when every file is valid. Checks with the
 * built-in renderers only.
 */
export async function validateFiles(
  files: string[],
  out: (line: string) => void,
  options: { strict?: boolean; placeholders?: PlaceholderFlags } = {},
): Promise<boolean> {
  const { registry, external } = await validationRegistry(undefined);
  const results = await checkFiles(
    files,
    {
      registry,
      external,
      ...(options.placeholders !== undefined ? { placeholders: options.placeholders } : {}),
    },
    options.strict,
  );
  for (const line of formatResults(results, options.strict === true)) out(line);
  return results.every((r) => r.result !== 'invalid');
}

/** `oscar validate` (flags in ./index.ts). */
export async function validateCommand(
  program: Command,
  args: string[],
  opts: ValidateOptions,
): Promise<void> {
  const files = [...(opts.file ?? []), ...args];
  if (files.length === 0) {
    program.error(
      'oscar validate: name at least one file (oscar validate -f osc.yaml, or -f - for stdin)',
    );
  }
  let format;
  try {
    format = parseOutputFormat(opts.output);
  } catch (error) {
    program.error(`oscar validate: ${(error as Error).message}`);
  }
  let context: CheckContext;
  try {
    context = {
      ...(await validationRegistry(opts.renderersConfig)),
      ...(opts.refDir !== undefined ? { refDir: opts.refDir } : {}),
      placeholders: opts,
    };
  } catch (error) {
    program.error(`oscar validate: --renderers-config: ${(error as Error).message}`);
  }
  try {
    placeholderContext(opts, 'default'); // a malformed --values fails the command, not a file
  } catch (error) {
    program.error(`oscar validate: ${(error as Error).message}`);
  }
  const strict = opts.strict === true;
  const results = await checkFiles(files, context, strict);
  const ok = results.every((r) => r.result !== 'invalid');
  if (format) {
    process.stdout.write(printStructured({ valid: ok, strict, documents: results }, format));
  } else {
    for (const line of formatResults(results, strict)) console.error(line);
    const valid = results.filter((r) => r.result === 'valid').length;
    if (ok) {
      console.log(
        `${String(valid)} OperatingSystemConfig(s) in ${String(files.length)} file(s) valid`,
      );
    }
  }
  process.exitCode = ok ? 0 : 1;
}
