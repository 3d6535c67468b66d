/**
 * Controller configuration of external renderers: a YAML or JSON mapping of spec.type → where
 * its renderer lives. The same text comes from a file (`--renderers-config`) or from a ConfigMap
 * (key `renderers.yaml`, mounted as that file or read with parseRenderersConfigMap):
 *
 *   alpine:
 *     url: https://alpine-renderer.example.svc:8443/render
 *     formats: [script]          # what it produces; the first is the default
 *     caFile: /etc/oscar/renderers/ca.pem   # or caBundle: "-----BEGIN CERTIFICATE-----..."
 *     timeoutSeconds: 10         # per attempt (default 10)
 *     retries: 2                 # after a connection error or a plain 5xx (default 2)
 *     maxResponseBytes: 8388608  # default 8 MiB
 *
 * An entry for a built-in type (ubuntu, …) replaces the built-in renderer on purpose.
 */
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve as resolvePath } from 'node:path';
import { Type, type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import { parse } from 'yaml';
import { fieldError, ValidationError, type FieldError } from '../../api/field-error.js';
import { FORMATS } from '../../api/schema.js';
import { toFieldPath } from '../../api/validate.js';
import { defaultRegistry, type RendererRegistry } from '../registry.js';
import { WebhookRenderer } from './client.js';

export const CONFIGMAP_KEY = 'renderers.yaml';

export const RendererEntry = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      description: 'http:// or https:// URL the RenderRequest is POSTed to.',
    }),
    formats: Type.Array(
      Type.Unsafe<(typeof FORMATS)[number]>({ type: 'string', enum: [...FORMATS] }),
      {
        minItems: 1,
        description: 'Formats the renderer produces; the first is the default.',
      },
    ),
    caBundle: Type.Optional(Type.String({ minLength: 1, description: 'PEM CA bundle.' })),
    caFile: Type.Optional(Type.String({ minLength: 1, description: 'Path of a PEM CA bundle.' })),
    timeoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 300 })),
    retries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10 })),
    maxResponseBytes: Type.Optional(Type.Integer({ minimum: 1024 })),
  },
  { additionalProperties: false },
);
export type RendererEntry = Static<typeof RendererEntry>;

const checkEntry = Compile(RendererEntry);
const TYPE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** One external renderer, ready to construct: the CA already read. */
export interface WebhookEntry {
  type: string;
  url: string;
  formats: (typeof FORMATS)[number][];
  ca?: string;
  timeoutMs?: number;
  retries?: number;
  maxResponseBytes?: number;
}

interface ParseOptions {
  source: string;
  baseDir?: string;
  readFile?: (path: string) => Promise<string>;
}

/**
 * Parses and checks the configuration text. `source` names it in errors; relative caFile paths
 * are taken from `baseDir`. Throws ValidationError naming each bad field.
 */
export async function parseRenderersConfig(
  text: string,
  options: ParseOptions = { source: 'renderers config' },
): Promise<WebhookEntry[]> {
  const doc = mappingOf(text, options.source);
  const errors: FieldError[] = [];
  const entries: WebhookEntry[] = [];
  for (const [type, raw] of Object.entries(doc)) {
    const entry = await entryOf(type, raw, options);
    if (Array.isArray(entry)) errors.push(...entry);
    else entries.push(entry);
  }
  if (errors.length > 0) throw new ValidationError(errors);
  return entries;
}

/** The text as a mapping of type → entry (empty text: no entries). */
function mappingOf(text: string, source: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parse(text, { uniqueKeys: true });
  } catch (error) {
    throw new ValidationError([
      fieldError('', `${source} is not YAML or JSON: ${(error as Error).message}`),
    ]);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    throw new ValidationError([
      fieldError('', `${source} must be a mapping of OS type → { url, formats, … }`),
    ]);
  }
  return doc as Record<string, unknown>;
}

/** One entry checked and its CA read, or the errors of its first bad field. */
async function entryOf(
  type: string,
  raw: unknown,
  options: ParseOptions,
): Promise<WebhookEntry | FieldError[]> {
  if (!TYPE.test(type) || type.length > 63) {
    return [fieldError(type, 'is not a valid spec.type (lowercase a-z, 0-9 and "-")')];
  }
  if (!checkEntry.Check(raw)) return schemaErrors(type, raw);
  const problem = endpointProblem(type, raw);
  if (problem) return [problem];
  const entry: WebhookEntry = { type, url: raw.url, formats: [...raw.formats] };
  const ca = await caOf(type, raw, options);
  if (typeof ca === 'object') return [ca];
  if (ca !== undefined) entry.ca = ca;
  if (raw.timeoutSeconds !== undefined) entry.timeoutMs = Math.round(raw.timeoutSeconds * 1000);
  if (raw.retries !== undefined) entry.retries = raw.retries;
  if (raw.maxResponseBytes !== undefined) entry.maxResponseBytes = raw.maxResponseBytes;
  return entry;
}

/** The schema's errors, each under the entry's type, an unknown field with the known ones. */
function schemaErrors(type: string, raw: unknown): FieldError[] {
  const errors: FieldError[] = [];
  for (const e of checkEntry.Errors(raw) as Iterable<{
    instancePath: string;
    message: string;
    keyword: string;
    params: Record<string, unknown>;
  }>) {
    const sub = toFieldPath(e.instancePath);
    const extra =
      e.keyword === 'additionalProperties'
        ? ` (${JSON.stringify(e.params.additionalProperties ?? e.params)}); known: url, formats, caBundle, caFile, timeoutSeconds, retries, maxResponseBytes`
        : '';
    errors.push(fieldError(sub ? `${type}.${sub}` : type, `${e.message}${extra}`));
  }
  return errors;
}

/** The URL is http(s); a CA (one way of giving it) only with https. */
function endpointProblem(type: string, raw: RendererEntry): FieldError | undefined {
  let url: URL;
  try {
    url = new URL(raw.url);
  } catch {
    return fieldError(
      `${type}.url`,
      `"${raw.url}" is not a URL; write e.g. https://renderer.example.svc:8443/render`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return fieldError(`${type}.url`, 'must start with http:// or https://');
  }
  if (raw.caBundle !== undefined && raw.caFile !== undefined) {
    return fieldError(`${type}.caFile`, 'set caBundle or caFile, not both');
  }
  if ((raw.caBundle !== undefined || raw.caFile !== undefined) && url.protocol !== 'https:') {
    return fieldError(`${type}.url`, 'a CA bundle is set but the URL is not https://');
  }
  return undefined;
}

/** The CA bundle, given or read from caFile (relative to baseDir); it must hold a certificate. */
async function caOf(
  type: string,
  raw: RendererEntry,
  options: ParseOptions,
): Promise<string | FieldError | undefined> {
  let ca = raw.caBundle;
  if (raw.caFile !== undefined) {
    const read = options.readFile ?? ((path: string) => readFile(path, 'utf8'));
    const path = isAbsolute(raw.caFile)
      ? raw.caFile
      : resolvePath(options.baseDir ?? '.', raw.caFile);
    try {
      ca = await read(path);
    } catch (error) {
      return fieldError(`${type}.caFile`, `cannot read ${path}: ${(error as Error).message}`);
    }
  }
  if (ca !== undefined && !ca.includes('-----BEGIN CERTIFICATE-----')) {
    return fieldError(
      `${type}.${raw.caFile === undefined ? 'caBundle' : 'caFile'}`,
      'holds no PEM certificate (-----BEGIN CERTIFICATE-----)',
    );
  }
  return ca;
}

export async function loadRenderersConfigFile(path: string): Promise<WebhookEntry[]> {
  const text = await readFile(path, 'utf8');
  return parseRenderersConfig(text, { source: path, baseDir: dirname(path) });
}

/** The same configuration from a ConfigMap's data (key renderers.yaml). */
export async function parseRenderersConfigMap(
  data: Record<string, string> | undefined,
  name: string,
): Promise<WebhookEntry[]> {
  const text = data?.[CONFIGMAP_KEY];
  if (text === undefined) {
    throw new ValidationError([
      fieldError(`data.${CONFIGMAP_KEY}`, `ConfigMap ${name} has no key ${CONFIGMAP_KEY}`),
    ]);
  }
  return parseRenderersConfig(text, { source: `ConfigMap ${name}` });
}

export function webhookRenderer(
  entry: WebhookEntry,
  options: { userAgent?: string } = {},
): WebhookRenderer {
  return new WebhookRenderer({
    ...options,
    url: entry.url,
    types: [entry.type],
    formats: entry.formats,
    ...(entry.ca === undefined ? {} : { ca: entry.ca }),
    ...(entry.timeoutMs === undefined ? {} : { timeoutMs: entry.timeoutMs }),
    ...(entry.retries === undefined ? {} : { retries: entry.retries }),
    ...(entry.maxResponseBytes === undefined ? {} : { maxResponseBytes: entry.maxResponseBytes }),
  });
}

/**
 * The built-in registry plus one WebhookRenderer per entry (an entry for a built-in type
 * replaces it). `renderers` lists the webhook renderers so the caller can close() them.
 */
export function registryWithWebhooks(
  entries: readonly WebhookEntry[],
  base: RendererRegistry = defaultRegistry(),
  options: { userAgent?: string } = {},
): { registry: RendererRegistry; renderers: WebhookRenderer[] } {
  const renderers: WebhookRenderer[] = [];
  for (const entry of entries) {
    const renderer = webhookRenderer(entry, options);
    base.register(renderer, { replace: true });
    renderers.push(renderer);
  }
  return { registry: base, renderers };
}
