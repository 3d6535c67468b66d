/**
 * cloud-config (cloud-init: Ubuntu, Debian, openSUSE). Files and units go to `write_files`
 * (units and drop-ins as files under /etc/systemd/system), packages to `packages`, and `runcmd`
 * masks, reloads, enables and starts units in a fixed order.
 *
 * Exactness details cloud-init forces on us:
 * - cloud-init changes owners by name only (getpwnam), so a numeric owner is set by a `chown` in
 *   runcmd instead; and its chown after chmod clears setuid/setgid bits, so such modes are
 *   re-applied by a `chmod` in runcmd.
 * - A file owned by anyone but root may belong to a user a package in this same config creates,
 *   so it is written with `defer: true` (cloud-init's final stage, after packages are installed,
 *   before runcmd).
 * - `locale: C.UTF-8`: cloud-init otherwise runs update-locale for en_US.UTF-8, which fails on
 *   images without that locale and leaves the boot degraded.
 */
import { writtenAfterPackages, type ResolvedConfig } from '../api/resolved.js';
import type { Purpose } from '../api/schema.js';
import type { RenderContext } from './types.js';
import {
  base64Length,
  gzipIfSmaller,
  header,
  INLINE_TEXT_MAX,
  inlineText,
  type TextFile,
  isNumericId,
  modeText,
  planUnits,
} from './common.js';
import { ByteBuilder } from './byte-builder.js';
import { doubleQuoted, literalBlock, scalar } from './yaml-writer.js';
import { privateFilesBootcmd } from './private-files.js';

const SPECIAL_BITS = 0o7000;

/**
 * The `content` (and `encoding`) of one write_files entry: a literal block for readable text up
 * to INLINE_TEXT_MAX, else base64, or gzip + base64 when that is smaller.
 */
export function contentField(
  file: TextFile,
  purpose: Purpose,
  encodings: Map<string, string> | undefined,
  out: ByteBuilder,
): void {
  const content = file.content;
  if (content.length === 0) {
    encodings?.set(file.path, 'empty');
    out.ascii("    content: ''\n");
    return;
  }
  // checked and indented natively from the bytes (a unit file's too: its bytes are its string's
  // UTF-8, and only ASCII is decided there)
  const verdict =
    content.length <= INLINE_TEXT_MAX ? out.literalBlock(content, 4, '    content: ') : 'undecided';
  if (verdict === 'written') {
    encodings?.set(file.path, 'text');
    return;
  }
  otherContent(file, verdict, purpose, encodings, out);
}

/** The content field the native literal block did not write ('unreadable' or 'undecided'). */
function otherContent(
  file: TextFile,
  verdict: 'unreadable' | 'undecided',
  purpose: Purpose,
  encodings: Map<string, string> | undefined,
  out: ByteBuilder,
): void {
  const content = file.content;
  const text = verdict === 'undecided' ? inlineText(file) : undefined;
  if (text !== undefined) {
    const block = literalBlock(text, 4);
    encodings?.set(file.path, block ? 'text' : 'quoted');
    out
      .ascii('    content: ')
      .text(block ?? doubleQuoted(text))
      .ascii('\n');
    return;
  }
  const zipped = gzipIfSmaller(content, base64Length(content.length), purpose);
  if (zipped) {
    encodings?.set(file.path, 'gz+b64');
    out.ascii('    encoding: gz+b64\n    content: "').base64(zipped).ascii('"\n');
    return;
  }
  encodings?.set(file.path, 'b64');
  out.ascii('    encoding: b64\n    content: "').base64(content).ascii('"\n');
}

/** The markup after a file's content: its mode, and its owner when it is written deferred. */
function fileTail(file: TextFile): string {
  const tail = `    permissions: "${modeText(file.mode)}"\n`;
  // cloud-init sets owners by name only: a named owner is written deferred, after packages
  // (writtenAfterPackages); one with an id is written now and chowned in runcmd, after them too
  if (isNumericId(file.user) || isNumericId(file.group) || !writtenAfterPackages(file)) return tail;
  return `${tail}    owner: ${doubleQuoted(`${file.user}:${file.group}`)}\n    defer: true\n`;
}

/** The runcmd fix-ups a file needs: a numeric owner's chown, a setuid/setgid/sticky mode's chmod. */
function fixupsOf(file: TextFile, fixups: string[][]): void {
  if (isNumericId(file.user) || isNumericId(file.group)) {
    fixups.push(['chown', `${file.user}:${file.group}`, file.path]);
  }
  if ((file.mode & SPECIAL_BITS) !== 0) fixups.push(['chmod', modeText(file.mode), file.path]);
}

/**
 * Every file's markup laid out in one string, to be written into the builder's scratch at once
 * (ByteBuilder's `staged`): per file k, marks[3k] to marks[3k + 1] is the previous file's tail
 * and k's `path` line; marks[3k + 1] to marks[3k + 2] is `content: ` with the literal block's
 * header, when the content may take the native block (else empty). The last file's tail ends
 * the string. 600 writes of a few dozen bytes each cost more than the one.
 */
function stageFileMarkup(files: readonly TextFile[]): {
  text: string;
  marks: Int32Array;
  end: number;
} {
  const marks = new Int32Array(files.length * 3);
  let text = '';
  let tail = '';
  for (let k = 0; k < files.length; k++) {
    const file = files[k] as TextFile;
    marks[3 * k] = text.length;
    text += `${tail}  - path: ${scalar(file.path)}\n`;
    marks[3 * k + 1] = text.length;
    const header =
      file.content.length <= INLINE_TEXT_MAX ? ByteBuilder.blockHeader(file.content, 4) : undefined;
    if (header !== undefined) text += `    content: ${header}`;
    marks[3 * k + 2] = text.length;
    tail = fileTail(file);
  }
  text += tail;
  return { text, marks, end: text.length };
}

/** The write_files entries, their markup taken from the staged string (stageFileMarkup). */
function writeStagedFiles(
  files: readonly TextFile[],
  { marks, end }: { marks: Int32Array; end: number },
  purpose: Purpose,
  encodings: Map<string, string> | undefined,
  out: ByteBuilder,
): void {
  for (let k = 0; k < files.length; k++) {
    const file = files[k] as TextFile;
    const from = marks[3 * k] as number;
    const headerAt = marks[3 * k + 1] as number;
    const to = marks[3 * k + 2] as number;
    if (to > headerAt) {
      const verdict = out.stagedBlock(file.content, 4, from, to);
      if (verdict === 'written') {
        encodings?.set(file.path, 'text');
        continue;
      }
      out.staged(from, headerAt);
      otherContent(file, verdict, purpose, encodings, out);
      continue;
    }
    out.staged(from, headerAt);
    contentField(file, purpose, encodings, out);
  }
  // the last file's tail
  if (files.length > 0) out.staged(marks[marks.length - 1] as number, end);
}

function flow(items: readonly string[]): string {
  return `[${items.map(scalar).join(', ')}]`;
}

export function renderCloudConfig(
  config: ResolvedConfig,
  context: RenderContext,
  encodings?: Map<string, string>,
): Buffer {
  const plan = planUnits(config.units);
  const files = [...config.files, ...plan.files];
  const staged = stageFileMarkup(files);
  const out = new ByteBuilder(staged.text);
  out.ascii('#cloud-config\n');
  out.text(`# ${header(config, context.name, context.namespace)}\n`);
  out.ascii('locale: C.UTF-8\n');

  if (config.packages.length > 0) {
    // A minimal image has no package lists yet; refresh them before installing.
    out.text('package_update: true\npackages:\n');
    for (const p of config.packages) {
      out.text(`  - ${p.version === undefined ? scalar(p.name) : flow([p.name, p.version])}\n`);
    }
  }

  const fixups: string[][] = [];
  // a private file must exist at a narrow mode before write_files opens it (./private-files.ts)
  out.text(privateFilesBootcmd(files));
  if (files.length > 0) out.text('write_files:\n');
  if (out.stagedAscii) writeStagedFiles(files, staged, config.purpose, encodings, out);
  else {
    // markup with a byte from 0x80 up (a path, an owner): staged offsets are not byte offsets
    for (const file of files) {
      out.text(`  - path: ${scalar(file.path)}\n`);
      contentField(file, config.purpose, encodings, out);
      out.text(fileTail(file));
    }
  }
  for (const file of files) fixupsOf(file, fixups);

  const commands: string[][] = [...fixups];
  if (plan.mask.length > 0) commands.push(['systemctl', 'mask', ...plan.mask]);
  if (plan.files.length > 0 || plan.mask.length > 0) commands.push(['systemctl', 'daemon-reload']);
  if (plan.mask.length > 0) commands.push(['systemctl', 'stop', ...plan.mask]);
  if (plan.enable.length > 0) commands.push(['systemctl', 'enable', ...plan.enable]);
  // --no-block: runcmd runs inside cloud-final.service, which boot is still waiting for; a unit
  // ordered after multi-user.target would otherwise deadlock the boot.
  for (const { unit, command } of plan.commands) {
    commands.push(['systemctl', '--no-block', command, unit]);
  }
  if (commands.length > 0) {
    out.text('runcmd:\n');
    for (const c of commands) out.text(`  - ${flow(c)}\n`);
  }
  return out.toBuffer();
}
