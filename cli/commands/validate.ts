import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { formatFieldError } from '../../api/field-error.js';
import { loadDocuments } from '../../api/load.js';
import { validateOperatingSystemConfig } from '../../api/validate.js';

/** One line per problem, `file:document: field.path: message`, the form editors can jump to. */
export async function validateFiles(
  files: string[],
  out: (line: string) => void,
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
      const errors = doc.errors.length > 0 ? doc.errors : validateOperatingSystemConfig(doc.value);
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
  opts: { file?: string[] },
): Promise<void> {
  const files = [...(opts.file ?? []), ...args];
  if (files.length === 0) {
    program.error('oscar validate: name at least one file (oscar validate -f osc.yaml)');
  }
  const ok = await validateFiles(files, (line) => {
    console.error(line);
  });
  if (ok) console.log(`${files.length} file(s) valid`);
  process.exitCode = ok ? 0 : 1;
}
