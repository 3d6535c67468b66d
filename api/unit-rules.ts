/**
 * The rules of a declared unit that hold whatever form it comes in, said once: the OSC's deep
 * validation (api/deep-validate.ts, on the raw spec) and the resolved config's check
 * (api/validate-config.ts, on what the agent is about to apply) both call these.
 */
import { fieldError, type FieldError } from './field-error.js';

/** What the rules need to know of one unit, from either form. */
export interface UnitFacts {
  /** Its filePaths, as given (a raw spec may hold non-strings: those are the schema's to refuse). */
  filePaths: readonly unknown[];
  onChange: unknown;
  mask: boolean;
  enable: boolean;
  /** oscar writes its unit file. */
  hasContent: boolean;
  /** It has at least one drop-in. */
  hasDropIns: boolean;
  /** Its unit file or a drop-in sets [Service] ExecReload=. */
  hasReload: boolean;
}

/**
 * - every filePath is a declared file;
 * - onChange: reload needs ExecReload= (when oscar writes the unit);
 * - a masked unit is neither enabled nor has content;
 * - onChange: reboot needs something whose change the reboot is for (content, a drop-in or a
 *   filePath) on a unit that is not masked.
 */
export function checkUnitRules(
  u: UnitFacts,
  base: string,
  declaredFiles: ReadonlySet<string>,
  out: FieldError[],
): void {
  u.filePaths.forEach((p, j) => {
    if (typeof p === 'string' && !declaredFiles.has(p)) {
      out.push(
        fieldError(
          `${base}.filePaths[${j}]`,
          `"${p}" is not declared in spec.files; add the file or remove it from filePaths`,
        ),
      );
    }
  });
  if (u.onChange === 'reload' && u.hasContent && !u.hasReload) {
    out.push(
      fieldError(
        `${base}.onChange`,
        '"reload" needs ExecReload= in the unit\'s [Service] section (or a drop-in); add it, or use onChange: restart',
      ),
    );
  }
  if (u.mask && u.enable) {
    out.push(
      fieldError(`${base}.enable`, 'a masked unit cannot be enabled; remove enable or mask'),
    );
  }
  if (
    u.onChange === 'reboot' &&
    (u.mask || (!u.hasContent && !u.hasDropIns && u.filePaths.length === 0))
  ) {
    out.push(
      fieldError(
        `${base}.onChange`,
        u.mask
          ? '"reboot" on a masked unit has nothing to reboot for; remove onChange or mask'
          : '"reboot" has nothing to reboot for: the unit has no content, dropIns or filePaths; declare what changes, or remove onChange',
      ),
    );
  }
  if (u.mask && u.hasContent) {
    out.push(fieldError(`${base}.content`, 'a masked unit has no content; remove content or mask'));
  }
}

/**
 * A NUL byte in a unit file or drop-in, as "line N: message", or undefined. systemd ends a line
 * at a NUL (and oscar's parser with it), so `Description=x\0ExecStartPre=/bin/sh …` is two
 * settings, while `systemctl cat`, editors and `kubectl get -o yaml` show one line: what a
 * reviewer reads and what systemd applies would differ.
 */
export function nulByteProblem(text: string): string | undefined {
  const at = text.indexOf('\0');
  if (at < 0) return undefined;
  let line = 1;
  for (let i = 0; i < at; i++) if (text.charCodeAt(i) === 0x0a) line++;
  return `line ${String(line)}: contains a NUL byte, which systemd reads as the end of the line (what follows becomes another line that tools do not show): remove it`;
}
