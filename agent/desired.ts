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
import { formatFieldError } from '../api/field-error.js';
import { loadDocuments } from '../api/load.js';
import { resolve } from '../api/resolve.js';
import type { ResolvedConfig } from '../api/resolved.js';
import type { OperatingSystemConfig } from '../api/schema.js';
import { validateOperatingSystemConfig } from '../api/validate.js';
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

/** Every OSC in a YAML stream, validated and resolved; any problem throws with file:doc: field. */
export async function desiredFromYaml(
  text: string,
  file: string,
  expand?: Expand,
): Promise<NamedDesired[]> {
  const out: NamedDesired[] = [];
  const problems: string[] = [];
  for (const doc of loadDocuments(text)) {
    const errors = doc.errors.length > 0 ? doc.errors : validateOperatingSystemConfig(doc.value);
    if (errors.length > 0) {
      problems.push(...errors.map((e) => `${file}:${doc.index}: ${formatFieldError(e)}`));
      continue;
    }
    const osc = doc.value as OperatingSystemConfig;
    const resolved = resolve(osc.spec);
    if (!resolved.ok) {
      problems.push(
        ...resolved.errors.map(
          (e) =>
            `${file}:${doc.index}: ${formatFieldError(e)}${/secretRef|configMapRef/.test(e.path) ? ' (a local file cannot reference Secrets or ConfigMaps: inline the content)' : ''}`,
        ),
      );
      continue;
    }
    const config = expand ? await expand(resolved.config, osc) : resolved.config;
    out.push({ name: osc.metadata.name, ...desiredFromConfig(config) });
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
): Promise<NamedDesired> {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{') && trimmed.includes(`"kind":"${CANONICAL_KIND}"`)) {
    try {
      const bytes = Buffer.from(text, 'utf8');
      return { name: file, config: parseCanonical(bytes), checksum: sha256Hex(bytes), bytes };
    } catch (error) {
      throw new DesiredError(`${file}: ${(error as Error).message}`, { cause: error });
    }
  }
  const all = await desiredFromYaml(text, file, expand);
  const reconcile = all.filter((d) => d.config.purpose === 'reconcile');
  const pick = all.length === 1 ? all[0] : reconcile.length === 1 ? reconcile[0] : undefined;
  if (!pick) {
    throw new DesiredError(
      `${file}: holds ${all.length} OperatingSystemConfigs (${reconcile.length} of purpose reconcile); the agent follows exactly one — split the file`,
    );
  }
  return pick;
}
