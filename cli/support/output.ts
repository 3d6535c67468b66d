/** `-o json|yaml`: the machine-readable form of a command's result, as kubectl prints objects. */
import { stringify } from 'yaml';

export const OUTPUT_FORMATS = ['json', 'yaml'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** undefined: the human form. Anything else than json or yaml is refused, naming the choices. */
export function parseOutputFormat(value: string | undefined): OutputFormat | undefined {
  if (value === undefined) return undefined;
  if ((OUTPUT_FORMATS as readonly string[]).includes(value)) return value as OutputFormat;
  throw new Error(`-o/--output must be one of ${OUTPUT_FORMATS.join(', ')} (got "${value}")`);
}

export function printStructured(value: unknown, format: OutputFormat): string {
  return format === 'json'
    ? `${JSON.stringify(value, null, 2)}\n`
    : stringify(value, { lineWidth: 0 });
}
