/**
 * The placeholder flags `oscar render` and `oscar validate` share: --values KEY=VALUE (repeatable),
 * --machine, --cluster, --api-server. With any of them, a provision OSC's placeholders are
 * substituted (api/placeholders.ts) before it is validated and rendered, as the controller does
 * for an OscarConfig; without them the document is taken as written.
 */
import type { FieldError } from '../../api/field-error.js';
import {
  parseValuePairs,
  substituteSpec,
  type PlaceholderContext,
} from '../../api/placeholders.js';
import type { OperatingSystemConfig } from '../../api/schema.js';

export interface PlaceholderFlags {
  values?: string[];
  machine?: string;
  cluster?: string;
  apiServer?: string;
}

/** The context the flags give, or undefined when none is set. Throws on a malformed --values. */
export function placeholderContext(
  flags: PlaceholderFlags,
  namespace: string,
): PlaceholderContext | undefined {
  if (
    flags.values === undefined &&
    flags.machine === undefined &&
    flags.cluster === undefined &&
    flags.apiServer === undefined
  ) {
    return undefined;
  }
  const context: PlaceholderContext = {
    values: parseValuePairs(
      (flags.values ?? []).flatMap((v) => v.split(/,(?=[A-Za-z_][A-Za-z0-9_-]*=)/)),
    ),
  };
  if (flags.machine !== undefined) context.machine = { name: flags.machine, namespace };
  if (flags.cluster !== undefined) context.cluster = { name: flags.cluster };
  if (flags.apiServer !== undefined) context.apiServer = { url: flags.apiServer };
  return context;
}

/** The OSC with its placeholders substituted, or the fields that could not be. */
export function substituted(
  osc: OperatingSystemConfig,
  context: PlaceholderContext,
): { osc: OperatingSystemConfig } | { errors: FieldError[] } {
  const r = substituteSpec(osc.spec, context);
  return r.ok ? { osc: { ...osc, spec: r.spec } } : { errors: r.errors };
}
