/**
 * Decoders for the three formats (their table, with decode() and expectedOutcome, is ./formats.ts): user data back into the files (bytes, mode, owner), unit
 * enablement, masks, commands and packages it carries. They read what the renderers write (and
 * what cloud-init and Ignition accept for those keys), so the round-trip tests can check that
 * nothing was lost; `expectedOutcome` states what a config must decode to.
 *
 * Not on any hot path: the cloud-config decoder uses the `yaml` library in YAML 1.1 mode, the
 * dialect of cloud-init's PyYAML.
 */
import { gunzipSync } from 'node:zlib';
import { DECODE_LIMITS } from '../api/gunzip.js';
import { parse as parseYaml } from 'yaml';
import type { ResolvedPackage } from '../api/resolved.js';
import type { UnitCommand } from '../api/schema.js';
import { B64_DELIMITER } from './script.js';
import { privateFilesGuard, privatePaths } from './private-files.js';
import { readYamlSubset } from './yaml-reader.js';

/** Rendered output read back is bounded while it inflates (api/gunzip.ts). */
const RENDERED = { maxOutputLength: DECODE_LIMITS.renderedBytes };

export interface DecodedFile {
  path: string;
  mode: number;
  user: string;
  group: string;
  content: Buffer;
}

export interface Decoded {
  /** Every file written, unit files and drop-ins included, sorted by path. */
  files: DecodedFile[];
  mask: string[];
  enable: string[];
  commands: { unit: string; command: UnitCommand }[];
  packages: ResolvedPackage[];
}

export class DecodeError extends Error {
  override name = 'DecodeError';
}

function byPath(a: DecodedFile, b: DecodedFile): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}

/** The same outcome with contents as base64 text: cheap to compare and readable in a diff. */
export function comparable(decoded: Decoded): Omit<Decoded, 'files'> & {
  files: (Omit<DecodedFile, 'content' | 'mode'> & { content: string; mode: string })[];
} {
  return {
    ...decoded,
    files: decoded.files.map((f) => ({
      path: f.path,
      mode: f.mode.toString(8).padStart(4, '0'),
      user: f.user,
      group: f.group,
      content: f.content.toString('base64'),
    })),
  };
}

function splitOwner(owner: string): { user: string; group: string } {
  const colon = owner.indexOf(':');
  if (colon < 0) return { user: owner, group: owner };
  return { user: owner.slice(0, colon), group: owner.slice(colon + 1) };
}

function isGzip(data: Buffer): boolean {
  return data.length >= 2 && data[0] === 0x1f && data[1] === 0x8b;
}

// ---- cloud-config ---------------------------------------------------------------------------

type Obj = Record<string, unknown>;

function asList(value: unknown, what: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new DecodeError(`${what} is not a list`);
  return value;
}

function str(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new DecodeError(`${what} is not a string`);
  return value;
}

/** How the cloud-config decoder reads YAML: oscar's strict subset reader, or a full library. */
export type YamlReader = (text: string) => Obj;

/** The `yaml` library in YAML 1.1 mode (cloud-init's dialect): slow, but general. */
export const yamlLibraryReader: YamlReader = (text) =>
  parseYaml(text, { version: '1.1', uniqueKeys: true, maxAliasCount: 0 }) as Obj;

export function decodeCloudConfig(userData: Buffer, reader: YamlReader = readYamlSubset): Decoded {
  const text = (isGzip(userData) ? gunzipSync(userData, RENDERED) : userData).toString('utf8');
  if (!text.startsWith('#cloud-config\n')) throw new DecodeError('no #cloud-config header');
  const doc = reader(text);
  const files = new Map<string, DecodedFile>();
  asList(doc.write_files, 'write_files').forEach((raw, i) => {
    const entry = raw as Obj;
    const what = `write_files[${i}]`;
    const path = str(entry.path, `${what}.path`);
    const content = entry.content === undefined ? '' : str(entry.content, `${what}.content`);
    const encoding = entry.encoding === undefined ? '' : str(entry.encoding, `${what}.encoding`);
    let bytes: Buffer;
    if (encoding === '' || encoding === 'text/plain') bytes = Buffer.from(content, 'utf8');
    else if (encoding === 'b64' || encoding === 'base64') bytes = Buffer.from(content, 'base64');
    else if (['gz+b64', 'gzip+base64', 'gz+base64', 'gzip+b64'].includes(encoding)) {
      bytes = gunzipSync(Buffer.from(content, 'base64'), RENDERED);
    } else throw new DecodeError(`${what}.encoding "${encoding}" is not one oscar writes`);
    const mode =
      entry.permissions === undefined
        ? 0o644
        : parseInt(str(entry.permissions, `${what}.permissions`), 8);
    const owner = splitOwner(
      entry.owner === undefined ? 'root:root' : str(entry.owner, `${what}.owner`),
    );
    files.set(path, { path, mode, ...owner, content: bytes });
  });
  const out: Decoded = { files: [], mask: [], enable: [], commands: [], packages: [] };
  for (const [i, raw] of asList(doc.runcmd, 'runcmd').entries()) {
    const cmd = asList(raw, `runcmd[${i}]`).map((w, j) => str(w, `runcmd[${i}][${j}]`));
    runCommand(cmd, files, out);
  }
  for (const [i, raw] of asList(doc.packages, 'packages').entries()) {
    if (typeof raw === 'string') out.packages.push({ name: raw });
    else {
      const [name, version] = asList(raw, `packages[${i}]`).map((w) => str(w, `packages[${i}]`));
      if (name === undefined) throw new DecodeError(`packages[${i}] is empty`);
      out.packages.push(version === undefined ? { name } : { name, version });
    }
  }
  checkPrivateFilesGuard(doc.bootcmd, [...files.values()]);
  out.files = [...files.values()].sort(byPath);
  out.mask.sort();
  out.enable.sort();
  return out;
}

/**
 * `bootcmd`, when present, must be exactly the guard for the private files written (in
 * write_files order), and must be there when one is: it runs a shell, so nothing else may hide
 * in it, and a private file without it is written readable (./private-files.ts).
 */
function checkPrivateFilesGuard(bootcmd: unknown, written: readonly DecodedFile[]): void {
  const guard = privateFilesGuard(written);
  const want = guard === undefined ? [] : [guard];
  const got = asList(bootcmd, 'bootcmd');
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    throw new DecodeError(
      `bootcmd is not oscar's private-files guard for the ${privatePaths(written).length} private files written ` +
        '(renderers/private-files.ts)',
    );
  }
}

/** Applies one runcmd / script command to the decoded state (chown, chmod, systemctl). */
function runCommand(cmd: string[], files: Map<string, DecodedFile>, out: Decoded): void {
  const [program, ...args] = cmd;
  if (program === 'chown' || program === 'chmod') {
    const [value, path] = args;
    const file = path === undefined ? undefined : files.get(path);
    if (value === undefined || file === undefined) {
      throw new DecodeError(`${cmd.join(' ')}: names no written file`);
    }
    if (program === 'chown') Object.assign(file, splitOwner(value));
    else file.mode = parseInt(value, 8);
    return;
  }
  if (program !== 'systemctl') throw new DecodeError(`unexpected command ${cmd.join(' ')}`);
  const words = args.filter((a) => a !== '--no-block' && !a.startsWith('--root='));
  const [verb, ...units] = words;
  switch (verb) {
    case 'mask':
      out.mask.push(...units);
      break;
    case 'enable':
      out.enable.push(...units);
      break;
    case 'start':
    case 'restart':
    case 'stop':
      for (const unit of units) {
        if (!out.mask.includes(unit)) out.commands.push({ unit, command: verb });
      }
      break;
    case 'daemon-reload':
      break;
    default:
      throw new DecodeError(`unexpected systemctl ${words.join(' ')}`);
  }
}

// ---- Ignition -------------------------------------------------------------------------------

function dataUrl(source: string, what: string): Buffer {
  const comma = source.indexOf(',');
  if (!source.startsWith('data:') || comma < 0) throw new DecodeError(`${what} is not a data URL`);
  const meta = source.slice(5, comma);
  const data = source.slice(comma + 1);
  if (meta.endsWith(';base64')) return Buffer.from(data, 'base64');
  return Buffer.from(decodeURIComponent(data), 'utf8');
}

function ignitionOwner(value: unknown): string {
  if (value === undefined) return 'root';
  const o = value as { name?: unknown; id?: unknown };
  if (typeof o.name === 'string') return o.name;
  if (typeof o.id === 'number') return String(o.id);
  return 'root';
}

export function decodeIgnition(userData: Buffer): Decoded {
  const doc = JSON.parse(userData.toString('utf8')) as Obj;
  const version = (doc.ignition as Obj | undefined)?.version;
  if (version !== '3.3.0')
    throw new DecodeError(`ignition.version is ${String(version)}, want 3.3.0`);
  const out: Decoded = { files: [], mask: [], enable: [], commands: [], packages: [] };
  const storage = (doc.storage ?? {}) as Obj;
  asList(storage.files, 'storage.files').forEach((raw, i) => {
    const f = raw as Obj;
    const what = `storage.files[${i}]`;
    const contents = (f.contents ?? {}) as Obj;
    let content = dataUrl(str(contents.source, `${what}.contents.source`), what);
    if (contents.compression === 'gzip') content = gunzipSync(content, RENDERED);
    else if (contents.compression !== undefined && contents.compression !== '') {
      throw new DecodeError(`${what}: compression ${JSON.stringify(contents.compression)}`);
    }
    out.files.push({
      path: str(f.path, `${what}.path`),
      mode: typeof f.mode === 'number' ? f.mode : 0o644,
      user: ignitionOwner(f.user),
      group: ignitionOwner(f.group),
      content,
    });
  });
  const unitFile = (path: string, text: string): DecodedFile => ({
    path,
    mode: 0o644,
    user: 'root',
    group: 'root',
    content: Buffer.from(text, 'utf8'),
  });
  const systemd = (doc.systemd ?? {}) as Obj;
  asList(systemd.units, 'systemd.units').forEach((raw, i) => {
    const u = raw as Obj;
    const name = str(u.name, `systemd.units[${i}].name`);
    if (u.mask === true) out.mask.push(name);
    if (u.enabled === true) out.enable.push(name);
    if (u.contents !== undefined) {
      out.files.push(unitFile(`/etc/systemd/system/${name}`, str(u.contents, `${name}.contents`)));
    }
    for (const d of asList(u.dropins, `${name}.dropins`)) {
      const dropIn = d as Obj;
      out.files.push(
        unitFile(
          `/etc/systemd/system/${name}.d/${str(dropIn.name, 'dropin name')}`,
          str(dropIn.contents, 'dropin contents'),
        ),
      );
    }
  });
  out.files.sort(byPath);
  out.mask.sort();
  out.enable.sort();
  return out;
}

// ---- script ---------------------------------------------------------------------------------

/**
 * Splits one shell command starting at `pos` into words: unquoted characters, '…' strings,
 * "…" strings (with \\ \" \$ \` escapes) and backslash escapes; stops at an unquoted newline.
 * Returns the words and the position after the newline. Enough shell for what script.ts writes.
 */
export function shellWords(text: string, pos: number): { words: string[]; next: number } {
  const words: string[] = [];
  let word: string | undefined;
  let i = pos;
  while (i < text.length) {
    const c = text[i] ?? '';
    if (c === '\n') {
      i++;
      break;
    }
    if (c === ' ' || c === '\t') {
      if (word !== undefined) words.push(word);
      word = undefined;
      i++;
      continue;
    }
    if (word === undefined && c === '#') {
      const end = text.indexOf('\n', i);
      i = end < 0 ? text.length : end;
      continue;
    }
    word ??= '';
    if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new DecodeError('unterminated single quote');
      word += text.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === '\\' && '\\"$`'.includes(text[i + 1] ?? '')) i++;
        word += text[i] ?? '';
        i++;
      }
      i++;
    } else if (c === '\\') {
      word += text[i + 1] ?? '';
      i += 2;
    } else {
      word += c;
      i++;
    }
  }
  if (word !== undefined) words.push(word);
  return { words, next: i };
}

export function decodeScript(userData: Buffer): Decoded {
  const text = userData.toString('utf8');
  if (!text.startsWith('#!/bin/sh\n')) throw new DecodeError('no #!/bin/sh line');
  const files = new Map<string, DecodedFile>();
  const out: Decoded = { files: [], mask: [], enable: [], commands: [], packages: [] };
  const put = (args: string[], content: Buffer): void => {
    const [path, mode, owner] = args;
    if (path === undefined || mode === undefined || owner === undefined) {
      throw new DecodeError(`file command without path, mode and owner: ${args.join(' ')}`);
    }
    files.set(path, { path, mode: parseInt(mode, 8), ...splitOwner(owner), content });
  };
  let pos = 0;
  let inRootBranch = false;
  while (pos < text.length) {
    const { words, next } = shellWords(text, pos);
    pos = next;
    const [command, ...args] = words;
    if (command === undefined || command.startsWith('#')) continue;
    if (command === 'if') inRootBranch = args.join(' ') === '[ -n $ROOT ]; then';
    else if (command === 'else' || command === 'fi') inRootBranch = false;
    else if (command === 'oscar_text') {
      const [path, mode, owner, content] = args;
      if (content === undefined) throw new DecodeError('oscar_text without content');
      put([path ?? '', mode ?? '', owner ?? ''], Buffer.from(content, 'utf8'));
    } else if (command === 'oscar_b64') {
      const end = text.indexOf(`\n${B64_DELIMITER}\n`, pos - 1);
      if (args[3] !== `<<${B64_DELIMITER}` || end < 0)
        throw new DecodeError('oscar_b64 without here-document');
      put(args.slice(0, 3), Buffer.from(text.slice(pos, end + 1), 'base64'));
      pos = end + B64_DELIMITER.length + 2;
    } else if (command === 'oscar_packages') {
      for (const spec of args) {
        const eq = spec.indexOf('=');
        out.packages.push(
          eq < 0 ? { name: spec } : { name: spec.slice(0, eq), version: spec.slice(eq + 1) },
        );
      }
    } else if (command === 'systemctl') {
      const rooted = args.some((a) => a.startsWith('--root='));
      // the ROOT branch carries mask and enable; the other branch carries the commands
      if (inRootBranch && rooted) runCommand(words, files, out);
      else if (
        !inRootBranch &&
        !rooted &&
        ['start', 'restart', 'stop'].some((v) => args.includes(v))
      ) {
        runCommand(words, files, out);
      }
    }
  }
  out.files = [...files.values()].sort(byPath);
  out.mask.sort();
  out.enable.sort();
  return out;
}
