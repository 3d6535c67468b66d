/**
 * A POSIX shell script (any systemd Linux) that needs nothing but sh, mkdir, rm, base64, chmod,
 * chown and systemctl (plus the package manager when spec.packages is set). Running it twice
 * gives the same result; a provision script leaves a marker so a reboot does not run it again.
 * Order, as cloud-init's and the agent's: files and unit files, packages, the files owned by
 * other user or group names (writtenAfterPackages), then systemctl.
 *
 * ROOT=DIR runs it against a directory instead of the machine: files land below DIR, units are
 * masked and enabled with `systemctl --root=DIR` and nothing is started or installed. That is how
 * the tests apply it, and how an image build can use it.
 */
import { PACKAGE_COMMANDS } from '../api/constants.js';
import { packageSpec, writtenAfterPackages, type ResolvedConfig } from '../api/resolved.js';
import type { RenderContext } from './types.js';
import { header, inlineText, isInlineText, modeText, planUnits, type TextFile } from './common.js';
import { profileFor } from './profiles.js';
import { ByteBuilder } from './byte-builder.js';

export const PROVISION_MARKER = '/var/lib/oscar/provisioned';
export const B64_DELIMITER = 'OSCAR_B64';
/**
 * base64 here-documents are cut into lines of this many characters: long lines keep the number
 * of cuts (and the time to make them) small, and with the LF they stay within the 2048 bytes
 * POSIX promises a text utility reads in one line (LINE_MAX counts the newline); a multiple of 4,
 * so every line is whole base64 quanta. base64 -d reads any line length.
 */
export const B64_LINE = 2044;

const SHELL_WORD = /^[A-Za-z0-9_./@:+=,-]+$/;

/** A shell word that reads back as exactly `s` (single quotes unless nothing needs quoting). */
export function shQuote(s: string): string {
  if (s !== '' && SHELL_WORD.test(s)) return s;
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

function words(args: readonly string[]): string {
  return args.map(shQuote).join(' ');
}

const PRELUDE = `set -eu
ROOT=\${ROOT:-}
# files are created private and get their final mode once complete
umask 077

# oscar_parent PATH: the directories above PATH, mode 0755 as an OS creates them
oscar_parent() {
  (umask 022 && mkdir -p "$ROOT\${1%/*}/")
}

# oscar_finish PATH MODE OWNER: owner first, since chown clears setuid and setgid bits
oscar_finish() {
  chown "$3" "$ROOT$1"
  chmod "$2" "$ROOT$1"
}

# oscar_new PATH: a new file is written, never the old one: an existing file may be readable
# by others (and open in a reader), or a link to elsewhere; rm removes a link, not its target
oscar_new() {
  oscar_parent "$1"
  rm -f "$ROOT$1"
}

# oscar_text PATH MODE OWNER TEXT: writes TEXT exactly (printf adds no newline)
oscar_text() {
  oscar_new "$1"
  printf '%s' "$4" >"$ROOT$1"
  oscar_finish "$1" "$2" "$3"
}

# oscar_b64 PATH MODE OWNER: writes the base64 text on standard input, decoded
oscar_b64() {
  oscar_new "$1"
  base64 -d >"$ROOT$1"
  oscar_finish "$1" "$2" "$3"
}
`;

function packageFunction(manager: 'apt' | 'zypper' | undefined): string {
  const env = Object.entries(PACKAGE_COMMANDS.aptEnv)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  const apt = [
    `${env} ${PACKAGE_COMMANDS.aptRefresh.join(' ')}`,
    `${env} ${PACKAGE_COMMANDS.aptInstall.join(' ')} "$@"`,
  ];
  const zypper = [`${PACKAGE_COMMANDS.zypperInstall.join(' ')} "$@"`];
  const body =
    manager === 'apt'
      ? apt.map((l) => `  ${l}`)
      : manager === 'zypper'
        ? zypper.map((l) => `  ${l}`)
        : [
            '  if command -v apt-get >/dev/null 2>&1; then',
            ...apt.map((l) => `    ${l}`),
            '  elif command -v zypper >/dev/null 2>&1; then',
            ...zypper.map((l) => `    ${l}`),
            '  else',
            '    echo "oscar: no package manager (apt-get, zypper) to install: $*" >&2',
            '    exit 1',
            '  fi',
          ];
  return [
    '',
    '# oscar_packages NAME[=VERSION]...: installs packages with the OS package manager, under the',
    "# OS's usual umask: the files and directories maintainer scripts make must not come out private",
    'oscar_packages() (',
    '  umask 022',
    ...body,
    ')',
    '',
  ].join('\n');
}

/**
 * The command that writes one file: printf for readable text up to INLINE_TEXT_MAX, a base64
 * here-document else. Text without a single quote is copied into the quotes byte for byte.
 */
export function fileCommand(
  file: TextFile,
  encodings: Map<string, string> | undefined,
  out: ByteBuilder,
): void {
  // a mode is digits, and root:root the usual owner: neither needs a look for quoting
  const owner =
    file.user === 'root' && file.group === 'root'
      ? 'root:root'
      : shQuote(`${file.user}:${file.group}`);
  const args = `${shQuote(file.path)} ${modeText(file.mode)} ${owner}`;
  const content = file.content;
  if (file.text !== undefined) {
    // a unit file: its text is at hand, no need to look at (or decode) the bytes
    const text = inlineText(file);
    if (text !== undefined) {
      encodings?.set(file.path, 'text');
      if (!text.includes("'") && (text.includes('\n') || text.includes(' '))) {
        out.text(`oscar_text ${args} '`).text(text).ascii("'\n");
      } else {
        out.text(`oscar_text ${args} ${shQuote(text)}\n`);
      }
      return;
    }
  } else if (isInlineText(content)) {
    encodings?.set(file.path, 'text');
    // with a space or LF and no quote, shQuote would only wrap the text in quotes
    if (content.indexOf(0x27) < 0 && (content.indexOf(0x0a) >= 0 || content.indexOf(0x20) >= 0)) {
      out.text(`oscar_text ${args} '`).bytes(content).ascii("'\n");
    } else {
      out.text(`oscar_text ${args} ${shQuote(content.toString('utf8'))}\n`);
    }
    return;
  }
  encodings?.set(file.path, 'b64');
  out.text(`oscar_b64 ${args} <<'${B64_DELIMITER}'\n`);
  out.base64(content, B64_LINE);
  out.ascii(content.length > 0 ? `\n${B64_DELIMITER}\n` : `${B64_DELIMITER}\n`);
}

export function renderScript(
  config: ResolvedConfig,
  context: RenderContext,
  encodings?: Map<string, string>,
): Buffer {
  const plan = planUnits(config.units);
  const provision = config.purpose === 'provision';
  const out = new ByteBuilder();
  out.text(
    [
      '#!/bin/sh\n',
      `# ${header(config, context.name, context.namespace)}\n`,
      '# Needs only sh, mkdir, rm, base64, chmod, chown and systemctl. Run it as root; running it again\n',
      '# is safe. ROOT=DIR writes below DIR instead of /, enables units with systemctl --root=DIR and\n',
      '# starts and installs nothing.\n',
      PRELUDE,
    ].join(''),
  );
  if (provision) {
    out.push(
      `\n# provision runs once: a reboot finds the marker and stops here\n`,
      `marker="$ROOT${PROVISION_MARKER}"\n`,
      'if [ -e "$marker" ]; then\n',
      '  echo "oscar: $marker exists: already provisioned"\n',
      '  exit 0\n',
      'fi\n',
    );
  }
  // cloud-init's order, which the agent follows too: files (an apt source and its keyring among
  // them) and units, then packages, then the files of users a package may create
  const files = [...config.files, ...plan.files];
  const early = files.filter((f) => !writtenAfterPackages(f));
  const late = files.filter(writtenAfterPackages);
  if (early.length > 0) out.push('\n');
  for (const file of early) fileCommand(file, encodings, out);

  if (config.packages.length > 0) {
    out.push(packageFunction(profileFor(config.type).packageManager));
    const specs = config.packages.map(packageSpec);
    out.push('if [ -z "$ROOT" ]; then\n', `  oscar_packages ${words(specs)}\n`, 'fi\n');
  }
  if (late.length > 0) out.push('\n');
  for (const file of late) fileCommand(file, encodings, out);

  const touchesUnits =
    plan.files.length + plan.mask.length + plan.enable.length + plan.commands.length > 0;
  if (touchesUnits) {
    out.push('\nif [ -n "$ROOT" ]; then\n');
    if (plan.mask.length > 0) out.push(`  systemctl --root="$ROOT" mask ${words(plan.mask)}\n`);
    if (plan.enable.length > 0) {
      out.push(`  systemctl --root="$ROOT" enable ${words(plan.enable)}\n`);
    }
    if (plan.mask.length === 0 && plan.enable.length === 0) out.push('  :\n');
    out.push('else\n');
    if (plan.mask.length > 0) out.push(`  systemctl mask ${words(plan.mask)}\n`);
    out.push('  systemctl daemon-reload\n');
    if (plan.mask.length > 0) out.push(`  systemctl stop ${words(plan.mask)}\n`);
    if (plan.enable.length > 0) out.push(`  systemctl enable ${words(plan.enable)}\n`);
    // provision may run from a boot service: --no-block so a unit ordered after it cannot
    // deadlock the boot; reconcile runs later and waits, so a failing start fails the script
    const block = provision ? ' --no-block' : '';
    for (const { unit, command } of plan.commands) {
      out.push(`  systemctl${block} ${command} ${shQuote(unit)}\n`);
    }
    out.push('fi\n');
  }

  if (provision) {
    out.push(`\noscar_parent ${PROVISION_MARKER}\n`, ': >"$marker"\n');
  }
  out.push('echo "oscar: done"\n');
  return out.toBuffer();
}
