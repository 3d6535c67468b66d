/**
 * Per-machine placeholders in a provision OSC: `{{ machine.name }}`, `{{ machine.namespace }}`,
 * `{{ cluster.name }}`, `{{ apiServer.url }}`, `{{ apiServer.endpoint }}`,
 * `{{ apiServer.caCertHash }}`, `{{ bootstrap.token }}` and `{{ values.KEY }}`, substituted into plain-text
 * inline file contents and unit contents (and drop-ins) of the spec *before* it is validated and
 * rendered, so every renderer encodes the result as it encodes any content.
 *
 * It is substitution, not a template language: one pass from left to right, a placeholder is a
 * name and nothing else (no expressions, no pipes, no loops, no calls), and a substituted value is
 * never scanned again, so a value holding "{{" stays as it is. A literal "{{" is written
 * `{{ "{{" }}`; in a run of braces the placeholder opens at the last two ("{{{ x }}" is "{" and
 * then {{ x }}). Anything else between "{{" and "}}" — an unknown name, a value that is not given,
 * a "{{" with no "}}" — is an error that names the field, the line and the fix.
 *
 * Files given as base64 or gzip, and contents from secretRef / configMapRef, are bytes oscar does
 * not read as text: they are never substituted.
 *
 * `{{ bootstrap.token }}` is the machine's credential (for `kubeadm join`): it may only go into a
 * file that group and others cannot read (permissions such as "0600"), never into a unit (unit
 * files are world-readable) — so a placeholder cannot leak it.
 */
import { formatBytes } from './bytes.js';
import { fieldError, type FieldError } from './field-error.js';
import { DECODE_LIMITS } from './gunzip.js';
import type { OperatingSystemConfigSpec } from './schema.js';

export interface PlaceholderContext {
  machine?: { name: string; namespace: string };
  cluster?: { name: string };
  /** caCertHash: "sha256:<hex>" of the CA's SubjectPublicKeyInfo (kubeadm's CA pin). */
  apiServer?: { url: string; caCertHash?: string };
  /** The machine's bootstrap token, "<id>.<secret>": only the bootstrap controller knows it. */
  bootstrap?: { token: string };
  values?: Readonly<Record<string, string>>;
}

/** The names a placeholder can have besides values.KEY. */
export const PLACEHOLDER_NAMES = [
  'machine.name',
  'machine.namespace',
  'cluster.name',
  'apiServer.url',
  'apiServer.endpoint',
  'apiServer.caCertHash',
  'bootstrap.token',
] as const;

/** Placeholders whose value is a credential: only private files may hold them. */
export const SECRET_PLACEHOLDERS: ReadonlySet<string> = new Set(['bootstrap.token']);

const NO_VALUE_HINTS: Readonly<Record<string, string>> = {
  'cluster.name': " (a Cluster API Machine's cluster, or the controller's --cluster-name)",
  'apiServer.caCertHash': " (the bootstrap controller's --bootstrap-ca)",
  'bootstrap.token':
    " (only the bootstrap controller knows a machine's token: it is substituted in the user data of an OscarConfig, never by `oscar render`)",
};

/**
 * "host:port" of an https URL, as `kubeadm join` takes it (the port spelled out even when it is
 * the default); undefined for anything else.
 */
export function endpointOf(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'https:' || u.hostname === '') return undefined;
  return `${u.hostname}:${u.port === '' ? '443' : u.port}`;
}

/** How a literal "{{" is written. */
export const LITERAL_OPEN = '{{ "{{" }}';

const OPEN = '{{';
const CLOSE = '}}';
/** A placeholder is short: beyond this, "{{" without a near "}}" is reported as unclosed. */
const MAX_INNER = 256;
const NAME = /^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z_][A-Za-z0-9_-]*)+$/;
const LITERAL = /^"\{\{"$/;

export type SubstituteResult = { ok: true; text: string } | { ok: false; message: string };

export interface SubstituteOptions {
  /**
   * The text is a systemd unit: a substituted value must be one line without control
   * characters, so a value cannot add a directive ("\nExecStartPre=…") to the unit.
   */
  unit?: boolean;
  /** The text lands where only root reads it (a file with no group/other bits): may hold a credential. */
  private?: boolean;
  /** Collects the names substituted (to know, say, whether the token left oscar's own files). */
  used?: Set<string>;
  /**
   * The most characters the substituted text may have: values are short, placeholders shorter,
   * so a text of many placeholders naming a long value would otherwise grow hundreds of times
   * (1.4 MiB of "{{values.v}}" with a 4 KiB value is 490 MiB). Stops as soon as it is passed.
   */
  maxLength?: number;
}

/** The most one substituted field may hold: what one file may (DECODE_LIMITS.inlineFileBytes). */
export const SUBSTITUTED_FIELD_MAX = DECODE_LIMITS.inlineFileBytes;
/** The most all substituted fields of one spec may hold together, as all resolved files may. */
export const SUBSTITUTED_TOTAL_MAX = DECODE_LIMITS.configBytes;

function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

function lookup(
  name: string,
  context: PlaceholderContext,
): { value: string } | { problem: string } {
  if (name.startsWith('values.')) {
    const key = name.slice('values.'.length);
    const values = context.values ?? {};
    if (Object.hasOwn(values, key)) return { value: values[key] ?? '' };
    const known = Object.keys(values).sort();
    return {
      problem: `no value "${key}" is given; add it to the OscarConfig's spec.values (or --values ${key}=…)${known.length > 0 ? `; given: ${known.join(', ')}` : ''}`,
    };
  }
  if (!(PLACEHOLDER_NAMES as readonly string[]).includes(name)) {
    return {
      problem: `unknown placeholder; known: ${PLACEHOLDER_NAMES.join(', ')}, values.KEY`,
    };
  }
  const value = namedValue(name, context);
  if (value === undefined || value === '') {
    return { problem: `has no value here${NO_VALUE_HINTS[name] ?? ''}` };
  }
  return { value };
}

function namedValue(name: string, context: PlaceholderContext): string | undefined {
  switch (name) {
    case 'machine.name':
      return context.machine?.name;
    case 'machine.namespace':
      return context.machine?.namespace;
    case 'cluster.name':
      return context.cluster?.name;
    case 'apiServer.url':
      return context.apiServer?.url;
    case 'apiServer.endpoint':
      return context.apiServer ? endpointOf(context.apiServer.url) : undefined;
    case 'apiServer.caCertHash':
      return context.apiServer?.caCertHash;
    case 'bootstrap.token':
      return context.bootstrap?.token;
    default:
      return undefined;
  }
}

/** Control characters other than tab: what may not enter a unit file through a value. */
// eslint-disable-next-line no-control-regex
const UNIT_UNSAFE = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/**
 * Substitutes the placeholders of one text. Text without "{{" is returned as it is (the same
 * string), so configs without placeholders cost one indexOf per field.
 */
export function substituteText(
  text: string,
  context: PlaceholderContext,
  options: SubstituteOptions = {},
): SubstituteResult {
  let at = text.indexOf(OPEN);
  if (at === -1) return { ok: true, text };
  let out = '';
  let from = 0;
  while (at !== -1) {
    // In a run of braces the placeholder opens at the last two: "{{{ x }}" is "{" then {{ x }}.
    while (text.charCodeAt(at + OPEN.length) === 0x7b) at++;
    out += text.slice(from, at);
    const end = text.indexOf(CLOSE, at + OPEN.length);
    const inner = end === -1 ? '' : text.slice(at + OPEN.length, end);
    if (end === -1 || inner.length > MAX_INNER || inner.includes('\n')) {
      return {
        ok: false,
        message: `line ${String(lineOf(text, at))}: "{{" without a closing "}}"; write ${LITERAL_OPEN} for a literal "{{"`,
      };
    }
    const name = inner.trim();
    if (LITERAL.test(name)) {
      out += OPEN;
    } else if (!NAME.test(name)) {
      return {
        ok: false,
        message: `line ${String(lineOf(text, at))}: "{{${inner}}}" is not a placeholder (a placeholder is a name such as {{ machine.name }} or {{ values.region }}); write ${LITERAL_OPEN} for a literal "{{"`,
      };
    } else {
      const found = lookup(name, context);
      if ('problem' in found) {
        return {
          ok: false,
          message: `line ${String(lineOf(text, at))}: {{ ${name} }}: ${found.problem}`,
        };
      }
      if (SECRET_PLACEHOLDERS.has(name) && options.private !== true) {
        return {
          ok: false,
          message: `line ${String(lineOf(text, at))}: {{ ${name} }} is the machine's credential: put it only in a file that group and others cannot read (permissions such as "0600"), never in a unit or a world-readable file`,
        };
      }
      if (options.unit === true && UNIT_UNSAFE.test(found.value)) {
        return {
          ok: false,
          message: `line ${String(lineOf(text, at))}: {{ ${name} }}: a value substituted into a unit must be one line without control characters (it could add directives to the unit)`,
        };
      }
      out += found.value;
      options.used?.add(name);
      if (options.maxLength !== undefined && out.length > options.maxLength) {
        return {
          ok: false,
          message: `line ${String(lineOf(text, at))}: with {{ ${name} }} the text passes ${formatBytes(options.maxLength)} (the most a file, or the rest of the OSC's budget for substituted text, may hold); use fewer placeholders or shorter values`,
        };
      }
    }
    from = end + CLOSE.length;
    at = text.indexOf(OPEN, from);
  }
  return { ok: true, text: out + text.slice(from) };
}

/** `text` written so that substitution gives it back unchanged: every "{{" as {{ "{{" }}. */
export function escapePlaceholders(text: string): string {
  return text.split(OPEN).join(LITERAL_OPEN);
}

export type SubstituteSpecResult =
  | {
      ok: true;
      spec: OperatingSystemConfigSpec;
      /** The placeholder names substituted anywhere in the spec. */
      used: ReadonlySet<string>;
    }
  | { ok: false; errors: FieldError[] };

/** A file mode that group and others cannot read ("0600", "0400", "0700"). */
export function isPrivateMode(permissions: string | undefined): boolean {
  const mode = Number.parseInt(permissions ?? '0644', 8);
  return Number.isInteger(mode) && (mode & 0o077) === 0;
}

/**
 * Substitutes every placeholder of a provision spec. Returns the same spec object when nothing
 * changed, otherwise a copy (the input is never modified). Errors name each field.
 */
export function substituteSpec(
  spec: OperatingSystemConfigSpec,
  context: PlaceholderContext,
): SubstituteSpecResult {
  const errors: FieldError[] = [];
  const seen = { changed: false };
  const used = new Set<string>();
  let left = SUBSTITUTED_TOTAL_MAX;
  const field = (path: string, text: string, options: SubstituteOptions = {}): string => {
    const maxLength = Math.max(0, Math.min(SUBSTITUTED_FIELD_MAX, left));
    const r = substituteText(text, context, { ...options, used, maxLength });
    if (!r.ok) {
      errors.push(fieldError(path, r.message));
      return text;
    }
    if (r.text !== text) {
      seen.changed = true;
      left -= r.text.length;
    }
    return r.text;
  };
  const files = (spec.files ?? []).map((file, i) => {
    const inline = file.content.inline;
    if (!inline || (inline.encoding ?? '') !== '') return file;
    const data = field(`spec.files[${String(i)}].content.inline.data`, inline.data, {
      private: isPrivateMode(file.permissions),
    });
    return data === inline.data ? file : { ...file, content: { inline: { ...inline, data } } };
  });
  const units = (spec.units ?? []).map((unit, i) => {
    const base = `spec.units[${String(i)}]`;
    const content =
      unit.content === undefined
        ? undefined
        : field(`${base}.content`, unit.content, { unit: true });
    const dropIns = unit.dropIns?.map((d, j) => {
      const c = field(`${base}.dropIns[${String(j)}].content`, d.content, { unit: true });
      return c === d.content ? d : { ...d, content: c };
    });
    const sameDropIns = !dropIns || dropIns.every((d, j) => d === unit.dropIns?.[j]);
    if (content === unit.content && sameDropIns) return unit;
    const copy = { ...unit };
    if (content !== undefined) copy.content = content;
    if (dropIns) copy.dropIns = dropIns;
    return copy;
  });
  if (errors.length > 0) return { ok: false, errors };
  if (!seen.changed) return { ok: true, spec, used };
  const out: OperatingSystemConfigSpec = { ...spec };
  if (spec.files) out.files = files;
  if (spec.units) out.units = units;
  return { ok: true, spec: out, used };
}

/** Parses "k=v" pairs (the CLI's --values); a key must be a valid values key. */
export function parseValuePairs(pairs: readonly string[]): Record<string, string> {
  const values: Record<string, string> = {};
  for (const pair of pairs) {
    const i = pair.indexOf('=');
    const key = i === -1 ? pair : pair.slice(0, i);
    if (i <= 0 || !/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)) {
      throw new Error(
        `--values ${JSON.stringify(pair)}: expected KEY=VALUE with KEY made of letters, digits, "_" and "-", such as region=eu-west-1`,
      );
    }
    values[key] = pair.slice(i + 1);
  }
  return values;
}
