import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { formatBytes } from '../../api/bytes.js';
import { fieldError, formatFieldError, type FieldError } from '../../api/field-error.js';
import { loadDocuments } from '../../api/load.js';
import { referencedObjects, type References } from '../../api/resolve.js';
import { FORMATS, type Format, type OperatingSystemConfig } from '../../api/schema.js';
import { validateOperatingSystemConfig } from '../../api/validate.js';
import { explain, formatExplain } from '../../renderers/explain.js';
import { defaultRegistry, renderDocument, selectRenderer } from '../../renderers/registry.js';
import { placeholderContext, substituted, type PlaceholderFlags } from './placeholders.js';

export interface RenderCommandOptions {
  file: string;
  format?: string;
  output?: string;
  gzip?: boolean;
  explain?: boolean;
  refDir?: string;
}

export type RenderOptions = RenderCommandOptions & PlaceholderFlags;

export interface CommandIo {
  stdout(data: string | Buffer): void;
  stderr(line: string): void;
}

/**
 * Reads the Secrets and ConfigMaps a spec references from DIR/secrets/<name>/<key> and
 * DIR/configmaps/<name>/<key> (the layout `kubectl get secret -o json | jq` or a mounted volume
 * gives). Without DIR, a referenced object is an error naming the flag.
 */
async function loadReferences(
  osc: OperatingSystemConfig,
  refDir: string | undefined,
): Promise<{ refs: References; errors: FieldError[] }> {
  const wanted = referencedObjects(osc.spec);
  const refs = {
    secrets: new Map<string, Record<string, Buffer>>(),
    configMaps: new Map<string, Record<string, Buffer>>(),
  };
  const errors: FieldError[] = [];
  const kinds = [
    ['secrets', 'Secret', wanted.secrets, refs.secrets],
    ['configmaps', 'ConfigMap', wanted.configMaps, refs.configMaps],
  ] as const;
  for (const [dirName, kind, names, into] of kinds) {
    for (const name of names) {
      if (refDir === undefined) {
        errors.push(
          fieldError(
            'spec.files',
            `${kind} "${name}" is referenced but cannot be looked up offline; pass --ref-dir DIR with its keys as files in DIR/${dirName}/${name}/<key>`,
          ),
        );
        continue;
      }
      const dir = join(refDir, dirName, name);
      let keys: string[];
      try {
        keys = (await readdir(dir, { withFileTypes: true }))
          .filter((e) => e.isFile() && !e.name.startsWith('.'))
          .map((e) => e.name);
      } catch {
        continue; // resolve() reports the missing object with its field path
      }
      const data: Record<string, Buffer> = {};
      for (const key of keys) data[key] = await readFile(join(dir, key));
      into.set(name, data);
    }
  }
  return { refs, errors };
}

/** The render command without process state, so tests drive it. Returns the exit code. */
export async function runRender(opts: RenderOptions, io: CommandIo): Promise<number> {
  const fail = (lines: string[]): number => {
    for (const line of lines) io.stderr(line);
    return 1;
  };
  if (opts.format !== undefined && !(FORMATS as readonly string[]).includes(opts.format)) {
    return fail([
      `oscar render: --format must be one of ${FORMATS.join(', ')} (got "${opts.format}")`,
    ]);
  }
  let text: string;
  try {
    text = await readFile(opts.file, 'utf8');
  } catch (error) {
    return fail([`${opts.file}: cannot read: ${(error as Error).message}`]);
  }
  const docs = loadDocuments(text);
  if (docs.length !== 1) {
    return fail([
      `${opts.file}: has ${docs.length} documents; oscar render takes one OperatingSystemConfig (split the file)`,
    ]);
  }
  const doc = docs[0];
  if (doc === undefined) return 1;
  const where = (e: FieldError): string => `${opts.file}: ${formatFieldError(e)}`;
  const errors = doc.errors.length > 0 ? doc.errors : validateOperatingSystemConfig(doc.value);
  if (errors.length > 0) return fail(errors.map(where));
  let osc = doc.value as OperatingSystemConfig;
  let context;
  try {
    context = placeholderContext(opts, osc.metadata.namespace ?? 'default');
  } catch (error) {
    return fail([`oscar render: ${(error as Error).message}`]);
  }
  if (context) {
    const r = substituted(osc, context);
    if ('errors' in r) return fail(r.errors.map(where));
    osc = r.osc;
  }

  const { refs, errors: refErrors } = await loadReferences(osc, opts.refDir);
  if (refErrors.length > 0) return fail(refErrors.map(where));

  const registry = defaultRegistry();
  const format = opts.format as Format | undefined;
  const options: { format?: Format; gzip?: boolean } = {};
  if (format !== undefined) options.format = format;
  if (opts.gzip === true) options.gzip = true;
  const rendered = await renderDocument(registry, osc, refs, options);
  if (!rendered.ok) return fail(rendered.errors.map(where));
  const { result, config } = rendered;

  for (const warning of result.warnings) io.stderr(`warning: ${warning}`);
  io.stderr(
    `oscar: ${osc.metadata.namespace ?? 'default'}/${osc.metadata.name}: ${result.format}, ${formatBytes(result.userData.length)} (${result.userData.length} bytes)`,
  );
  if (opts.explain === true) {
    const selected = selectRenderer(registry, config, format);
    if ('renderer' in selected) {
      io.stdout(
        formatExplain(
          explain(config, {
            name: osc.metadata.name,
            namespace: osc.metadata.namespace ?? 'default',
            purpose: config.purpose,
            format: result.format,
          }),
        ),
      );
    }
  }
  if (opts.output !== undefined) {
    await writeFile(opts.output, result.userData, { mode: 0o600 });
  } else if (opts.explain !== true) {
    io.stdout(result.userData);
  }
  return 0;
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
