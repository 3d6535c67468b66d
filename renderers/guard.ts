/**
 * The renderers' own guard. A ResolvedConfig normally comes out of validate + resolve, but a
 * renderer is also called with configs built in code (a provider, a webhook request), so before
 * it emits a single byte it re-checks what its output depends on: paths, modes, owners, unit and
 * drop-in names, unit syntax. An invalid config never produces output.
 */
import { checkFilePath } from '../api/deep-validate.js';
import { fieldError, ValidationError, type FieldError } from '../api/field-error.js';
import type { ResolvedConfig, ResolvedFile } from '../api/resolved.js';
import { isValidated } from '../api/validated.js';
import { validateDropInName, validateUnitName } from '../api/systemd/unit-name.js';
import { unitFacts } from './unit-facts.js';

/** The owner pattern of api/schema.ts, applied to each half. */
const OWNER_PART = /^[A-Za-z0-9_][A-Za-z0-9_.-]*[$]?$/;

/** The usual owner first: no regular expression for it. */
function ownerOk(part: string): boolean {
  return part === 'root' || OWNER_PART.test(part);
}

const PACKAGE_NAME = /^[A-Za-z0-9][A-Za-z0-9+._-]*$/;
const PACKAGE_VERSION = /^[A-Za-z0-9.+~:_-]+$/;

/**
 * The problems that keep `config` from being rendered (none: an empty list). A config from
 * validateAndResolve has passed the full validator already and is not looked at again.
 */
export function checkResolved(config: ResolvedConfig): FieldError[] {
  return isValidated(config) ? [] : checkEveryField(config);
}

/** The guard's checks, whatever the config's origin. */
export function checkEveryField(config: ResolvedConfig): FieldError[] {
  const errors: FieldError[] = [];
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(config.type)) {
    errors.push(fieldError('spec.type', `"${config.type}" is not a valid OS type`));
  }
  const paths = new Set<string>();
  // field paths are built only for a file that has a problem: most configs have none
  const base = (i: number): string => `spec.files[${i}]`;
  const files = config.files;
  for (let i = 0; i < files.length; i++) {
    const file = files[i] as ResolvedFile;
    const problem = checkFilePath(file.path);
    if (problem) errors.push(fieldError(`${base(i)}.path`, problem));
    if (paths.has(file.path)) errors.push(fieldError(`${base(i)}.path`, 'duplicate file path'));
    paths.add(file.path);
    if (!Number.isInteger(file.mode) || file.mode < 0 || file.mode > 0o7777) {
      errors.push(fieldError(`${base(i)}.permissions`, 'mode must be between 0 and 07777'));
    }
    if (!ownerOk(file.user)) {
      errors.push(
        fieldError(`${base(i)}.owner`, `user "${file.user}" is not a valid user name or id`),
      );
    }
    if (!ownerOk(file.group)) {
      errors.push(
        fieldError(`${base(i)}.owner`, `group "${file.group}" is not a valid group name or id`),
      );
    }
    if (!Buffer.isBuffer(file.content)) {
      errors.push(fieldError(`${base(i)}.content`, 'content must be bytes (a Buffer)'));
    }
  }
  const names = new Set<string>();
  config.units.forEach((unit, i) => {
    const base = `spec.units[${i}]`;
    const problem = validateUnitName(unit.name);
    if (problem) errors.push(fieldError(`${base}.name`, problem));
    if (names.has(unit.name)) errors.push(fieldError(`${base}.name`, 'duplicate unit name'));
    names.add(unit.name);
    if (unit.mask && (unit.content !== undefined || unit.enable)) {
      errors.push(fieldError(`${base}.mask`, 'a masked unit has no content and is not enabled'));
    }
    if (unit.content !== undefined) {
      for (const e of unitFacts(unit.content).errors) {
        errors.push(fieldError(`${base}.content`, `line ${e.line}: ${e.message}`));
      }
    }
    const dropIns = new Set<string>();
    unit.dropIns.forEach((d, j) => {
      const dropInProblem = validateDropInName(d.name);
      if (dropInProblem) errors.push(fieldError(`${base}.dropIns[${j}].name`, dropInProblem));
      if (dropIns.has(d.name)) {
        errors.push(fieldError(`${base}.dropIns[${j}].name`, 'duplicate drop-in name'));
      }
      dropIns.add(d.name);
      for (const e of unitFacts(d.content).errors) {
        errors.push(fieldError(`${base}.dropIns[${j}].content`, `line ${e.line}: ${e.message}`));
      }
    });
  });
  config.packages.forEach((p, i) => {
    if (!PACKAGE_NAME.test(p.name)) {
      errors.push(fieldError(`spec.packages[${i}].name`, `"${p.name}" is not a package name`));
    }
    if (p.version !== undefined && !PACKAGE_VERSION.test(p.version)) {
      errors.push(
        fieldError(`spec.packages[${i}].version`, `"${p.version}" is not a package version`),
      );
    }
  });
  return errors;
}

/** Configs renderOsc has just checked, so the renderer it calls does not check them again. */
const checked = new WeakSet<ResolvedConfig>();

/** Runs `render` with `config` marked as checked (renderOsc, after its own check). */
export async function withChecked<T>(config: ResolvedConfig, render: () => Promise<T>): Promise<T> {
  checked.add(config);
  try {
    return await render();
  } finally {
    checked.delete(config);
  }
}

/** Throws a ValidationError listing every problem; renderers call it before they emit anything. */
export function assertRenderable(config: ResolvedConfig): void {
  if (checked.has(config)) return;
  const errors = checkResolved(config);
  if (errors.length > 0) throw new ValidationError(errors);
}
