/**
 * Validation of an OperatingSystemConfig document, in the order a person wants to read it:
 * document shape, then the schema (api/schema.ts, the same one the CRD is made from), unknown
 * fields, then the deep checks the schema cannot express (api/deep-validate.ts). Every error
 * names the field and says how to fix it.
 */
import { Compile } from 'typebox/compile';
import { formatBytes } from './bytes.js';
import { deepValidate } from './deep-validate.js';
import { fieldError, type FieldError } from './field-error.js';
import {
  API_VERSION,
  OSC_KIND,
  OperatingSystemConfig,
  PACKAGE_NAME_HINT,
  type SchemaNode,
} from './schema.js';

const compiled = Compile(OperatingSystemConfig);

/**
 * Fields whose syntax the deep checks explain better than a regular expression can; the schema's
 * pattern and length errors for them are dropped in favour of the deep check's message.
 */
const DEEP_CHECKED = new Set([
  'spec.units.name',
  'spec.units.dropIns.name',
  'spec.files.path',
  'spec.files.permissions',
  'spec.rollout.maxUnavailable',
  'spec.rollout.failureThreshold',
  'spec.rollout.canary.nodes',
]);

/** What a pattern means, for the fields where a bare regular expression would not help. */
const PATTERN_HINTS: Record<string, string> = {
  'spec.type':
    'must be a lowercase OS name made of a-z, 0-9 and "-", such as "ubuntu" or "flatcar"',
  'spec.files.owner':
    'must be "user:group" or "user" (names or numeric ids), such as "root:root" or "1000:1000"',
  'spec.packages.name': PACKAGE_NAME_HINT,
  'spec.packages.version': 'must be a package version such as "1.7.12-1" or "1.31.2-1.1"',
};

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** instancePath "/spec/files/2/path" → "spec.files[2].path" */
/**
 * The longest OSC name: oscar labels its Secrets `oscar.dev/osc=<name>` (its informers select by
 * it), and a label value holds 63 characters. The CRD refuses longer names at admission; this
 * catches an object stored before that rule and the CLI's files.
 */
export const OSC_NAME_MAX = 63;
export const OSC_NAME_TOO_LONG = `must be at most ${String(OSC_NAME_MAX)} characters: oscar labels the OSC's Secrets oscar.dev/osc=<name> and a label value holds ${String(OSC_NAME_MAX)}; choose a shorter name`;

export function toFieldPath(pointer: string): string {
  let out = '';
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(part) ? `[${part}]` : out === '' ? part : `.${part}`;
  }
  return out;
}

/** "spec.files[2].path" → "spec.files.path": the field regardless of list position. */
function fieldKey(path: string): string {
  return path.replace(/\[\d+\]/g, '');
}

function valueAt(root: unknown, pointer: string): unknown {
  let node: unknown = root;
  for (const part of pointer.split('/').slice(1)) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return `the string ${JSON.stringify(truncate(value))}`;
  return `${typeof value} ${JSON.stringify(value)}`;
}

function truncate(s: string): string {
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
}

interface SchemaError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message: string;
}

function schemaErrors(doc: unknown): FieldError[] {
  if (compiled.Check(doc)) return [];
  const errors: FieldError[] = [];
  for (const raw of compiled.Errors(doc) as Iterable<SchemaError>) {
    const path = toFieldPath(raw.instancePath);
    const key = fieldKey(path);
    const actual = valueAt(doc, raw.instancePath);
    switch (raw.keyword) {
      case 'required': {
        const names = (raw.params.requiredProperties as string[] | undefined) ?? [];
        for (const name of names) {
          errors.push(fieldError(path ? `${path}.${name}` : name, 'is required'));
        }
        break;
      }
      case 'type':
        errors.push(
          fieldError(path, `must be ${article(String(raw.params.type))} (got ${describe(actual)})`),
        );
        break;
      case 'enum': {
        const allowed = (raw.params.allowedValues as unknown[]).map((v) => JSON.stringify(v));
        errors.push(
          fieldError(path, `must be one of ${allowed.join(', ')} (got ${describe(actual)})`),
        );
        break;
      }
      case 'pattern':
      case 'minLength':
        if (DEEP_CHECKED.has(key)) break;
        errors.push(
          fieldError(
            path,
            PATTERN_HINTS[key] ??
              (raw.keyword === 'minLength'
                ? `must have at least ${String(raw.params.limit)} characters`
                : raw.message),
          ),
        );
        break;
      case 'maxLength':
        if (DEEP_CHECKED.has(key)) break;
        errors.push(
          fieldError(
            path,
            key === 'spec.files.content.inline.data'
              ? `inline data is ${formatBytes(typeof actual === 'string' ? Buffer.byteLength(actual) : 0)}, above the ${formatBytes(Number(raw.params.limit))} limit (a Kubernetes Secret holds at most 1 MiB); put large files in the image or fetch them at boot`
              : `must have at most ${String(raw.params.limit)} characters`,
          ),
        );
        break;
      case 'maxItems':
        errors.push(
          fieldError(
            path,
            `has ${(actual as unknown[]).length} items; at most ${String(raw.params.limit)} are allowed`,
          ),
        );
        break;
      default:
        errors.push(fieldError(path, raw.message));
    }
  }
  return errors;
}

function article(type: string): string {
  const word = type === 'object' ? 'mapping' : type === 'array' ? 'list' : type;
  return /^[aeiou]/.test(word) ? `an ${word}` : `a ${word}`;
}

/**
 * Fields the schema does not know are refused, as `kubectl apply --validate=strict` would. The
 * path is kept as segments and joined only for an error: valid documents (the common case) are
 * walked without building a string per field.
 */
function unknownFields(
  schema: SchemaNode,
  value: unknown,
  path: (string | number)[],
  out: FieldError[],
): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    const items = schema.items as SchemaNode | undefined;
    if (!items || (items.properties === undefined && items.items === undefined)) return;
    for (let i = 0; i < value.length; i++) {
      path.push(i);
      unknownFields(items, value[i], path, out);
      path.pop();
    }
    return;
  }
  const properties = schema.properties as Record<string, SchemaNode> | undefined;
  if (!properties || schema['x-kubernetes-preserve-unknown-fields'] === true) return;
  for (const key in value) {
    const childSchema = properties[key];
    path.push(key);
    if (childSchema) {
      unknownFields(childSchema, (value as Record<string, unknown>)[key], path, out);
    } else {
      const guess = closest(key, Object.keys(properties));
      out.push(
        fieldError(
          joinPath(path),
          `unknown field${guess ? `; did you mean "${guess}"?` : `; known fields here: ${Object.keys(properties).join(', ')}`}`,
        ),
      );
    }
    path.pop();
  }
}

function joinPath(path: readonly (string | number)[]): string {
  let out = '';
  for (const part of path) {
    out += typeof part === 'number' ? `[${String(part)}]` : out === '' ? part : `.${part}`;
  }
  return out;
}

function closest(word: string, candidates: string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of candidates) {
    const d = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

function dedupe(errors: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const key = `${e.path}\0${e.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Validates one parsed document as an OperatingSystemConfig. An empty list means valid: it can
 * be resolved (given its references) and rendered.
 */
export function validateOperatingSystemConfig(doc: unknown): FieldError[] {
  if (doc === null || doc === undefined) {
    return [
      fieldError('', 'the document is empty; write an OperatingSystemConfig or remove the "---"'),
    ];
  }
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    return [
      fieldError(
        '',
        `the document is ${describe(doc)}, not a mapping; an OperatingSystemConfig starts with "apiVersion: ${API_VERSION}"`,
      ),
    ];
  }
  const object = doc as Record<string, unknown>;
  const errors: FieldError[] = [];
  if (object.apiVersion !== API_VERSION) {
    errors.push(
      fieldError('apiVersion', `must be "${API_VERSION}" (got ${describe(object.apiVersion)})`),
    );
  }
  if (object.kind !== OSC_KIND) {
    errors.push(fieldError('kind', `must be "${OSC_KIND}" (got ${describe(object.kind)})`));
  }
  if (errors.length > 0) return errors;

  const metadata = object.metadata as Record<string, unknown> | undefined;
  const name = metadata?.name;
  if (typeof name === 'string' && (name.length > 253 || !DNS_SUBDOMAIN.test(name))) {
    errors.push(
      fieldError(
        'metadata.name',
        'must be a DNS subdomain: lowercase a-z, 0-9, "-" and ".", starting and ending with a letter or digit, at most 253 characters',
      ),
    );
  }
  if (typeof name === 'string' && name.length > OSC_NAME_MAX) {
    errors.push(fieldError('metadata.name', OSC_NAME_TOO_LONG));
  }
  errors.push(...schemaErrors(doc));
  unknownFields(OperatingSystemConfig as unknown as SchemaNode, doc, [], errors);
  if (object.spec !== null && typeof object.spec === 'object' && !Array.isArray(object.spec)) {
    errors.push(...deepValidate(object.spec as Record<string, unknown>));
  }
  return dedupe(errors);
}
