import { writeFile } from 'node:fs/promises';
import { formatBytes } from '../../api/bytes.js';
import type { FieldError } from '../../api/field-error.js';
import { formatProblem, loadDocuments, namesDocuments, skipNote } from '../../api/load.js';
import { FORMATS, type Format, type OperatingSystemConfig } from '../../api/schema.js';
import { validateOperatingSystemConfig } from '../../api/validate.js';
import { explain, formatExplain } from '../../renderers/explain.js';
import { defaultRegistry, renderDocument, selectRenderer } from '../../renderers/registry.js';
import { displayName, readInput } from '../support/input.js';
import { parseOutputFormat, printStructured, type OutputFormat } from '../support/output.js';
import { loadReferences } from '../support/references.js';
import { placeholderContext, substituted, type PlaceholderFlags } from './placeholders.js';

export interface RenderCommandOptions {
  file: string;
  format?: string;
  /** -o: json or yaml, the form of --explain. */
  output?: string;
  /** --out: write the user data to this file (mode 0600). */
  out?: string;
  gzip?: boolean;
  explain?: boolean;
  refDir?: string;
}

export type RenderOptions = RenderCommandOptions & PlaceholderFlags;

export interface CommandIo {
  stdout(data: string | Buffer): void;
  stderr(line: string): void;
  /** What `-f -` reads (default: the process's stdin). */
  stdin?: NodeJS.ReadableStream;
}

/** A refusal: the lines to print on stderr before exiting 1. */
class Refused extends Error {
  constructor(readonly lines: string[]) {
    super(lines.join('\n'));
  }
}

/** The render command without process state, so tests drive it. Returns the exit code. */
export async function runRender(opts: RenderOptions, io: CommandIo): Promise<number> {
  try {
    const output = outputFlags(opts);
    const file = displayName(opts.file);
    const doc = await readOneOsc(opts, io, file);
    const where = (e: FieldError): string => formatProblem(file, doc.lineOf(e.path), e);
    const osc = substitutedOsc(opts, doc, where);
    const registry = defaultRegistry();
    const format = opts.format as Format | undefined;
    const { result, config } = await renderOsc(registry, osc, opts, where);
    for (const warning of result.warnings)
      io.stderr(`${file}:${String(doc.line)}: warning: ${warning}`);
    io.stderr(
      `oscar: ${osc.metadata.namespace ?? 'default'}/${osc.metadata.name}: ${result.format}, ${formatBytes(result.userData.length)} (${result.userData.length} bytes)`,
    );
    if (opts.explain === true) {
      const selected = selectRenderer(registry, config, format);
      if ('renderer' in selected) io.stdout(explained(osc, config, result, output));
    }
    if (opts.out !== undefined) {
      await writeFile(opts.out, result.userData, { mode: 0o600 });
    } else if (opts.explain !== true) {
      io.stdout(result.userData);
    }
    return 0;
  } catch (error) {
    if (!(error instanceof Refused)) throw error;
    for (const line of error.lines) io.stderr(line);
    return 1;
  }
}

/** --format names a format; -o is json or yaml, and only with --explain. */
function outputFlags(opts: RenderOptions): OutputFormat | undefined {
  if (opts.format !== undefined && !(FORMATS as readonly string[]).includes(opts.format)) {
    throw new Refused([
      `oscar render: --format must be one of ${FORMATS.join(', ')} (got "${opts.format}")`,
    ]);
  }
  let output: OutputFormat | undefined;
  try {
    output = parseOutputFormat(opts.output);
  } catch (error) {
    // `-o FILE` wrote the user data to a file before -o meant the output format everywhere
    throw new Refused([
      `oscar render: ${(error as Error).message}; -o formats --explain — write the user data to a file with --out ${opts.output ?? 'FILE'}`,
    ]);
  }
  if (output !== undefined && opts.explain !== true) {
    throw new Refused([
      'oscar render: -o json|yaml formats --explain (the user data is printed as it is); add --explain, or drop -o',
    ]);
  }
  return output;
}

type LoadedDocument = ReturnType<typeof loadDocuments>[number];

/** The input's one OperatingSystemConfig (other documents are noted and skipped). */
async function readOneOsc(
  opts: RenderOptions,
  io: CommandIo,
  file: string,
): Promise<LoadedDocument> {
  let text: string;
  try {
    text = await readInput(opts.file, io.stdin);
  } catch (error) {
    throw new Refused([`${file}: cannot read: ${(error as Error).message}`]);
  }
  const docs = loadDocuments(text);
  const broken = docs.filter((d) => d.errors.length > 0);
  if (broken.length > 0) {
    const named = namesDocuments(docs);
    throw new Refused(
      broken.flatMap((d) =>
        d.errors.map((e) => formatProblem(file, e.line, e, named ? d.index : undefined)),
      ),
    );
  }
  for (const d of docs) if (d.role === 'other') io.stderr(skipNote(file, d));
  const oscs = docs.filter((d) => d.role === 'osc');
  const doc = oscs[0];
  if (doc === undefined || oscs.length !== 1) {
    throw new Refused([
      `${file}: has ${oscs.length} OperatingSystemConfigs; oscar render takes one (split the file)`,
    ]);
  }
  return doc;
}

/** The validated OSC with the placeholder flags substituted. */
function substitutedOsc(
  opts: RenderOptions,
  doc: LoadedDocument,
  where: (e: FieldError) => string,
): OperatingSystemConfig {
  const errors = validateOperatingSystemConfig(doc.value);
  if (errors.length > 0) throw new Refused(errors.map(where));
  const osc = doc.value as OperatingSystemConfig;
  let context;
  try {
    context = placeholderContext(opts, osc.metadata.namespace ?? 'default');
  } catch (error) {
    throw new Refused([`oscar render: ${(error as Error).message}`]);
  }
  if (!context) return osc;
  const r = substituted(osc, context);
  if ('errors' in r) throw new Refused(r.errors.map(where));
  return r.osc;
}

/** The OSC rendered, its references (--ref-dir) read. */
async function renderOsc(
  registry: ReturnType<typeof defaultRegistry>,
  osc: OperatingSystemConfig,
  opts: RenderOptions,
  where: (e: FieldError) => string,
): Promise<Extract<Awaited<ReturnType<typeof renderDocument>>, { ok: true }>> {
  const { refs, errors: refErrors } = await loadReferences(osc, opts.refDir);
  if (refErrors.length > 0) throw new Refused(refErrors.map(where));
  const options: { format?: Format; gzip?: boolean } = {};
  if (opts.format !== undefined) options.format = opts.format as Format;
  if (opts.gzip === true) options.gzip = true;
  const rendered = await renderDocument(registry, osc, refs, options);
  if (!rendered.ok) throw new Refused(rendered.errors.map(where));
  return rendered;
}

type Rendered = Awaited<ReturnType<typeof renderOsc>>;

/** --explain: where each item of the config lands, as a table or as -o json|yaml. */
function explained(
  osc: OperatingSystemConfig,
  config: Rendered['config'],
  result: Rendered['result'],
  output: OutputFormat | undefined,
): string {
  const rows = explain(config, {
    name: osc.metadata.name,
    namespace: osc.metadata.namespace ?? 'default',
    purpose: config.purpose,
    format: result.format,
  });
  if (output === undefined) return formatExplain(rows);
  return printStructured(
    {
      name: osc.metadata.name,
      namespace: osc.metadata.namespace ?? 'default',
      format: result.format,
      bytes: result.userData.length,
      warnings: result.warnings,
      items: rows,
    },
    output,
  );
}

/** `oscar render` (flags in ./index.ts). */
export async function renderCommand(opts: RenderOptions): Promise<void> {
  process.exitCode = await runRender(opts, {
    stdout: (data) => process.stdout.write(data),
    stderr: (line) => {
      console.error(line);
    },
  });
}
