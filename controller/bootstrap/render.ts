/**
 * One machine's user data: the provision OSC's spec with the machine's placeholders substituted,
 * validated and resolved like any OSC, oscar's bootstrap additions laid over it, rendered by the
 * renderer its type picks. Used by the bootstrap controller, `oscar render --values`, the size
 * check and the benchmark, so all of them produce the same bytes.
 */
import { formatBytes } from '../../api/bytes.js';
import { ValidationError, type FieldError } from '../../api/field-error.js';
import { substituteSpec, type PlaceholderContext } from '../../api/placeholders.js';
import type { References } from '../../api/resolve.js';
import {
  API_VERSION,
  LIMITS,
  OSC_KIND,
  type Format,
  type OperatingSystemConfigSpec,
} from '../../api/schema.js';
import { validateAndResolve } from '../../api/validated.js';
import { renderOsc, type RendererRegistry } from '../../renderers/registry.js';
import { redactSecretData } from '../osc/redact.js';
import { bootstrapAdditions, withBootstrap, type BootstrapInputs } from './additions.js';

export interface MachineRenderInput {
  /** The provision OSC: its name (for messages) and spec. */
  provision: { name: string; namespace: string; spec: OperatingSystemConfigSpec };
  refs: References | ((spec: OperatingSystemConfigSpec) => References);
  placeholders: PlaceholderContext;
  /** Omitted: no bootstrap additions (what `oscar render --values` shows). */
  bootstrap?: BootstrapInputs;
  format?: Format;
}

export type MachineRenderResult =
  | {
      ok: true;
      userData: Buffer;
      format: Format;
      warnings: string[];
      /** The placeholder names the provision OSC used (bootstrap.token: the token leaves oscar's files). */
      placeholders: ReadonlySet<string>;
    }
  | {
      ok: false;
      /** Which step refused: the placeholders, the provision OSC, or the additions. */
      stage: 'placeholders' | 'validate' | 'resolve' | 'bootstrap' | 'render';
      errors: FieldError[];
    };

export async function renderMachine(
  registry: RendererRegistry,
  input: MachineRenderInput,
): Promise<MachineRenderResult> {
  const { provision } = input;
  if (provision.spec.purpose !== 'provision') {
    return {
      ok: false,
      stage: 'validate',
      errors: [
        {
          path: 'spec.purpose',
          message: `OperatingSystemConfig "${provision.name}" has purpose ${provision.spec.purpose}; a machine's user data comes from a provision OSC`,
        },
      ],
    };
  }
  const substituted = substituteSpec(provision.spec, input.placeholders);
  if (!substituted.ok) return { ok: false, stage: 'placeholders', errors: substituted.errors };
  const doc = {
    apiVersion: API_VERSION,
    kind: OSC_KIND,
    metadata: { name: provision.name, namespace: provision.namespace },
    spec: substituted.spec,
  };
  let refs: References | undefined;
  const resolved = validateAndResolve(
    doc,
    (spec) => (refs = typeof input.refs === 'function' ? input.refs(spec) : input.refs),
  );
  if (!resolved.ok) return { ok: false, stage: resolved.stage, errors: resolved.errors };
  let config = resolved.config;
  if (input.bootstrap) {
    const additions = bootstrapAdditions(input.bootstrap);
    if ('errors' in additions) return { ok: false, stage: 'bootstrap', errors: additions.errors };
    const merged = withBootstrap(config, additions);
    if ('errors' in merged) return { ok: false, stage: 'bootstrap', errors: merged.errors };
    config = merged;
  }
  try {
    const result = await renderOsc(registry, config, {
      name: input.placeholders.machine?.name ?? provision.name,
      namespace: provision.namespace,
      ...(input.format ? { format: input.format } : {}),
    });
    const hidden = secretsToHide(input, refs);
    const warnings = result.warnings.map((w) => redactSecretData(w, hidden));
    if (
      result.userData.length > LIMITS.provisionUserDataBytes &&
      !warnings.some((w) => w.includes('16 KiB'))
    ) {
      warnings.push(
        `the user data is ${formatBytes(result.userData.length)}, above the ${formatBytes(LIMITS.provisionUserDataBytes)} many clouds accept`,
      );
    }
    return {
      ok: true,
      userData: result.userData,
      format: result.format,
      warnings,
      placeholders: substituted.used,
    };
  } catch (error) {
    // A renderer's error may echo what it was sent: never the machine's token or a Secret's data.
    const hidden = secretsToHide(input, refs);
    if (error instanceof ValidationError) {
      const errors = error.errors.map((e) => ({
        ...e,
        message: redactSecretData(e.message, hidden),
      }));
      return { ok: false, stage: 'render', errors };
    }
    throw new Error(redactSecretData((error as Error).message, hidden), { cause: error });
  }
}

/** What a message about this machine's render must not show: its token, referenced Secrets' data. */
function secretsToHide(
  input: MachineRenderInput,
  refs: References | undefined,
): Map<string, Record<string, Buffer>> {
  const hidden = new Map<string, Record<string, Buffer>>(refs?.secrets ?? []);
  const token = input.placeholders.bootstrap?.token;
  if (token !== undefined) {
    hidden.set('', {
      token: Buffer.from(token),
      secret: Buffer.from(token.slice(token.indexOf('.') + 1)),
    });
  }
  return hidden;
}
