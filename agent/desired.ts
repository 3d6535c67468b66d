/**
 * Turning a local file into the desired state: either the canonical JSON a reconcile Secret
 * carries, or OperatingSystemConfig YAML that is validated and resolved here (the way the
 * controller would), so `oscar agent --file`, `oscar plan` and `oscar up` work with no cluster.
 */
import {
  canonicalWithChecksum,
  CANONICAL_KIND,
  parseCanonical,
  sha256Hex,
} from '../api/canonical.js';
import { fieldError } from '../api/field-error.js';
import { formatProblem, loadDocuments, namesDocuments, skipNote } from '../api/load.js';
import { resolve } from '../api/resolve.js';
import type { ResolvedConfig } from '../api/resolved.js';
import type { OperatingSystemConfig } from '../api/schema.js';
import { validateOperatingSystemConfig } from '../api/validate.js';
import { InvalidConfigError, validateConfig } from '../api/validate-config.js';
import { checkDesired } from './desired-check.js';
import type { Desired } from './state.js';

/** A step that adds what the OS profile needs (containerd config, …); identity by default. */
export type Expand = (
  config: ResolvedConfig,
  osc: OperatingSystemConfig,
) => Promise<ResolvedConfig>;

export interface NamedDesired extends Desired {
  /** metadata.name of the OSC, or the file name for canonical JSON. */
  name: string;
}

export class DesiredError extends Error {
  override name = 'DesiredError';
}

export function desiredFromConfig(config: ResolvedConfig): Desired {
  const { bytes, checksum } = canonicalWithChecksum(config);
  return { config, checksum, bytes };
}

export interface DesiredOptions {
  /** Told about documents that are skipped (another kind of object than an OSC). */
  onNote?: (line: string) => void;
}

/**
 * Every OSC in a YAML stream, validated and resolved; any problem throws with `file:line:` and
 * the field. Documents of other kinds (a Secret next to the OSC) are skipped with a note, empty
 * ones (a trailing `---`) silently.
 */
export async function desiredFromYaml(
  text: string,
  file: string,
  expand?: Expand,
  options: DesiredOptions = {},
): Promise<NamedDesired[]> {
  const out: NamedDesired[] = [];
  const problems: string[] = [];
  const docs = loadDocuments(text);
  const named = namesDocuments(docs);
  for (const doc of docs) {
    const index = named ? doc.index : undefined;
    if (doc.errors.length > 0) {
      problems.push(...doc.errors.map((e) => formatProblem(file, e.line, e, index)));
      continue;
    }
    if (doc.role === 'empty') continue;
    if (doc.role === 'other') {
      options.onNote?.(skipNote(file, doc));
      continue;
    }
    const errors = validateOperatingSystemConfig(doc.value);
    if (errors.length > 0) {
      problems.push(...errors.map((e) => formatProblem(file, doc.lineOf(e.path), e, index)));
      continue;
    }
    const osc = doc.value as OperatingSystemConfig;
    const resolved = resolve(osc.spec);
    if (!resolved.ok) {
      problems.push(
        ...resolved.errors.map((e) =>
          formatProblem(
            file,
            doc.lineOf(e.path),
            /secretRef|configMapRef/.test(e.path)
              ? fieldError(
                  e.path,
                  `${e.message} (a local file cannot reference Secrets or ConfigMaps: inline the content)`,
                )
              : e,
            index,
          ),
        ),
      );
      continue;
    }
    const config = expand ? await expand(resolved.config, osc) : resolved.config;
    // the OS profile's additions too: the whole state the agent would apply passes the rules
    const configErrors = validateConfig(config);
    if (configErrors.length > 0) {
      problems.push(
        ...configErrors.map((e) =>
          formatProblem(
            file,
            doc.line,
            fieldError(e.path, `${e.message} (with what the OS profile adds)`),
            index,
          ),
        ),
      );
      continue;
    }
    out.push({
      name: osc.metadata.name,
      ...desiredFromConfig(checkDesired(config, `file ${file}`)),
    });
  }
  if (problems.length > 0) throw new DesiredError(problems.join('\n'));
  return out;
}

/**
 * One desired state from a file: canonical JSON as is (its checksum is its own sha256), or a YAML
 * stream holding exactly one OSC (or exactly one of purpose reconcile).
 */
export async function desiredFromText(
  text: string,
  file: string,
  expand?: Expand,
  options: DesiredOptions = {},
): Promise<NamedDesired> {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{') && trimmed.includes(`"kind":"${CANONICAL_KIND}"`)) {
    try {
      const bytes = Buffer.from(text, 'utf8');
      const config = checkDesired(parseCanonical(bytes), `file ${file}`);
      return { name: file, config, checksum: sha256Hex(bytes), bytes };
    } catch (error) {
      if (error instanceof InvalidConfigError) throw error;
      throw new DesiredError(`${file}: ${(error as Error).message}`, { cause: error });
    }
  }
  const all = await desiredFromYaml(text, file, expand, options);
  const reconcile = all.filter((d) => d.config.purpose === 'reconcile');
  const pick = all.length === 1 ? all[0] : reconcile.length === 1 ? reconcile[0] : undefined;
  if (!pick) {
    throw new DesiredError(
      `${file}: holds ${all.length} OperatingSystemConfigs (${reconcile.length} of purpose reconcile); the agent follows exactly one — split the file`,
    );
  }
  return pick;
}
