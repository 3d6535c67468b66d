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
import type { ResolvedConfig, ResolvedFile } from '../api/resolved.js';
import { formatMode } from '../api/resolved.js';
import type { RenderContext } from './types.js';
import {
  base64Length,
  gzipIfSmaller,
  header,
  isNumericId,
  isReadableText,
  planUnits,
} from './common.js';
import { doubleQuoted, literalBlock, scalar } from './yaml-writer.js';

/** Files above this are never written as a readable block: base64 or gzip+base64 instead. */
const INLINE_TEXT_MAX = 4096;

const SPECIAL_BITS = 0o7000;

function contentField(file: ResolvedFile, encodings: Map<string, string>): string {
  const content = file.content;
  if (content.length === 0) {
    encodings.set(file.path, 'empty');
    return "    content: ''\n";
  }
  const readable = isReadableText(content);
  const plainSize = readable ? content.length : base64Length(content.length);
  if (!readable || content.length > INLINE_TEXT_MAX) {
    const zipped = gzipIfSmaller(content, plainSize);
    if (zipped) {
      encodings.set(file.path, 'gz+b64');
      return `    encoding: gz+b64\n    content: "${zipped.toString('base64')}"\n`;
    }
  }
  if (readable) {
    const text = content.toString('utf8');
    const block = literalBlock(text, 4);
    encodings.set(file.path, block ? 'text' : 'quoted');
    return `    content: ${block ?? doubleQuoted(text)}\n`;
  }
  encodings.set(file.path, 'b64');
  return `    encoding: b64\n    content: "${content.toString('base64')}"\n`;
}

function flow(items: readonly string[]): string {
  return `[${items.map(scalar).join(', ')}]`;
}

export function renderCloudConfigText(
  config: ResolvedConfig,
  context: RenderContext,
  encodings: Map<string, string> = new Map(),
): string {
  const plan = planUnits(config.units);
  const parts: string[] = [
    '#cloud-config\n',
    `# ${header(config, context.name, context.namespace)}\n`,
    'locale: C.UTF-8\n',
  ];

  if (config.packages.length > 0) {
    // A minimal image has no package lists yet; refresh them before installing.
    parts.push('package_update: true\npackages:\n');
    for (const p of config.packages) {
      parts.push(`  - ${p.version === undefined ? scalar(p.name) : flow([p.name, p.version])}\n`);
    }
  }

  const fixups: string[][] = [];
  const files = [...config.files, ...plan.files];
  if (files.length > 0) parts.push('write_files:\n');
  for (const file of files) {
    parts.push(`  - path: ${scalar(file.path)}\n`);
    parts.push(contentField(file, encodings));
    parts.push(`    permissions: "${formatMode(file.mode)}"\n`);
    const numeric = isNumericId(file.user) || isNumericId(file.group);
    if (!numeric && (file.user !== 'root' || file.group !== 'root')) {
      parts.push(`    owner: ${doubleQuoted(`${file.user}:${file.group}`)}\n    defer: true\n`);
    }
    if (numeric) fixups.push(['chown', `${file.user}:${file.group}`, file.path]);
    if ((file.mode & SPECIAL_BITS) !== 0) fixups.push(['chmod', formatMode(file.mode), file.path]);
  }

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
    parts.push('runcmd:\n');
    for (const c of commands) parts.push(`  - ${flow(c)}\n`);
  }
  return parts.join('');
}
