import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { formatFieldError } from '../../api/field-error.js';
import { loadDocuments } from '../../api/load.js';
import type { OperatingSystemConfig } from '../../api/schema.js';
import { validateOperatingSystemConfig } from '../../api/validate.js';
import { placeholderContext, substituted, type PlaceholderFlags } from './placeholders.js';

/** One line per problem, `file:document: field.path: message`, the form editors can jump to. */
export async function validateFiles(
  files: string[],
  out: (line: string) => void,
  flags: PlaceholderFlags = {},
): Promise<boolean> {
  let ok = true;
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      out(`${file}: cannot read: ${(error as Error).message}`);
      ok = false;
      continue;
    }
    for (const doc of loadDocuments(text)) {
      let errors = doc.errors.length > 0 ? doc.errors : validateOperatingSystemConfig(doc.value);
      // With placeholder flags, a valid provision OSC is checked again with them substituted.
      const osc = doc.value as OperatingSystemConfig;
      if (errors.length === 0 && osc.spec.purpose === 'provision') {
        const context = placeholderContext(flags, osc.metadata.namespace ?? 'default');
        if (context) {
          const r = substituted(osc, context);
          errors = 'errors' in r ? r.errors : validateOperatingSystemConfig(r.osc);
        }
      }
      for (const error of errors) {
        out(`${file}:${doc.index}: ${formatFieldError(error)}`);
        ok = false;
      }
    }
  }
  return ok;
}

/** `oscar validate` (flags in ./index.ts). */
export async function validateCommand(
  program: Command,
  args: string[],
  opts: { file?: string[] } & PlaceholderFlags,
): Promise<void> {
  const files = [...(opts.file ?? []), ...args];
  if (files.length === 0) {
    program.error('oscar validate: name at least one file (oscar validate -f osc.yaml)');
  }
  let ok: boolean;
  try {
    ok = await validateFiles(
      files,
      (line) => {
        console.error(line);
      },
      opts,
    );
  } catch (error) {
    program.error(`oscar validate: ${(error as Error).message}`);
  }
  if (ok) console.log(`${files.length} file(s) valid`);
  process.exitCode = ok ? 0 : 1;
}
