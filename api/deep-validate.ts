/**
 * The checks an OpenAPI schema cannot express: systemd's naming and syntax rules, path hygiene,
 * the octal-permissions trap, references between units and files, content that must decode.
 * Runs on a spec that may also have failed the schema, so it guards every access.
 */
import { fieldError, type FieldError } from './field-error.js';
import { checkModeSafety, checkOwnerIds } from './file-rules.js';
import { decodedInlineSize } from './resolve.js';
import { LIMITS } from './constants.js';
import {
  checkDropInDirName,
  checkFilePath,
  pathConflicts,
  unitPaths,
  type DeclaredPath,
} from './paths.js';
import { dropInPath, unitPath } from './resolved.js';
import { hasKey, parseUnitFile } from './systemd/unit-file.js';
import { validateDropInName, validateUnitName } from './systemd/unit-name.js';
import { formatBytes } from './bytes.js';
import { validateRolloutPolicy } from './rollout.js';
import { hasPackageManager, noPackageManager } from './os-facts.js';
import { checkRebootDeclarations } from './reboot-rules.js';
import { checkUnitRules, nulByteProblem } from './unit-rules.js';
import { oscarOwnedSpecErrors } from './oscar-owned.js';
import { isObj, type Obj } from './util.js';

export { checkFilePath, PROTECTED_PATHS } from './paths.js';

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** Modes people write; 420 is far likelier to be 0644 read as octal than mode 0420. */
const COMMON_MODES = new Set([
  '644',
  '755',
  '600',
  '640',
  '700',
  '750',
  '660',
  '444',
  '555',
  '400',
  '777',
]);

/** A message for permissions, or undefined when they are a valid octal string. */
export function checkPermissions(value: unknown): string | undefined {
  if (typeof value === 'number') {
    // 0644 unquoted is 420 in YAML 1.1 (octal) and 644 in YAML 1.2 (decimal): guess which mode was meant.
    const digits = String(value);
    const octal = value.toString(8);
    const meant = COMMON_MODES.has(octal) || !/^[0-7]{3,4}$/.test(digits) ? octal : digits;
    return (
      `must be a quoted octal string, not the number ${value}: YAML reads an unquoted 0644 as the integer 420 (octal) ` +
      `or 644 (decimal), neither of which is the mode you meant; write permissions: "${meant.padStart(4, '0')}"`
    );
  }
  if (typeof value !== 'string') return 'must be a quoted octal string such as "0644"';
  if (!/^0?[0-7]{3,4}$/.test(value)) {
    return `"${value}" is not an octal mode: use 3 or 4 octal digits (0-7) up to "07777", such as "0644" or "0755"`;
  }
  if (parseInt(value, 8) > 0o7777) return `"${value}" is above "07777"`;
  return undefined;
}

function checkDuplicates(
  items: unknown[],
  key: string,
  base: string,
  what: string,
  out: FieldError[],
): void {
  const first = new Map<string, number>();
  items.forEach((item, i) => {
    if (!isObj(item) || typeof item[key] !== 'string') return;
    const value = item[key];
    const seen = first.get(value);
    if (seen === undefined) first.set(value, i);
    else {
      out.push(
        fieldError(
          `${base}[${i}].${key}`,
          `duplicate ${what} "${value}" (also at ${base}[${seen}]); merge them into one entry`,
        ),
      );
    }
  });
}

function checkUnitSyntax(
  content: string,
  path: string,
  out: FieldError[],
): ReturnType<typeof parseUnitFile> {
  const parsed = parseUnitFile(content);
  for (const error of parsed.errors) {
    out.push(fieldError(path, `line ${error.line}: ${error.message}`));
  }
  const nul = nulByteProblem(content);
  if (nul) out.push(fieldError(path, nul));
  return parsed;
}

function checkUnits(spec: Obj, declaredFiles: Set<string>, out: FieldError[]): void {
  const units = list(spec.units);
  checkDuplicates(units, 'name', 'spec.units', 'unit name', out);
  units.forEach((raw, i) => {
    if (!isObj(raw)) return;
    const base = `spec.units[${i}]`;
    const name = raw.name;
    if (typeof name === 'string') {
      const problem = validateUnitName(name);
      if (problem) out.push(fieldError(`${base}.name`, problem));
      else if (list(raw.dropIns).length > 0) {
        const dirProblem = checkDropInDirName(name);
        if (dirProblem) out.push(fieldError(`${base}.name`, dirProblem));
      }
      if (declaredFiles.has(unitPath(name))) {
        out.push(
          fieldError(
            `${base}.name`,
            `spec.files also writes ${unitPath(name)}; declare the unit's content here and remove that file`,
          ),
        );
      }
    }
    let hasReload = false;
    let hasContent = false;
    if (typeof raw.content === 'string' && raw.content.length > 0) {
      hasContent = true;
      const parsed = checkUnitSyntax(raw.content, `${base}.content`, out);
      if (parsed.sections.length === 0 && parsed.errors.length === 0) {
        out.push(
          fieldError(
            `${base}.content`,
            'has no [Section]; a unit file needs at least [Unit] or [Service]',
          ),
        );
      }
      hasReload = hasKey(parsed, 'Service', 'ExecReload');
    }
    const dropIns = list(raw.dropIns);
    checkDuplicates(dropIns, 'name', `${base}.dropIns`, 'drop-in name', out);
    dropIns.forEach((d, j) => {
      if (!isObj(d)) return;
      if (typeof d.name === 'string') {
        const problem = validateDropInName(d.name);
        if (problem) out.push(fieldError(`${base}.dropIns[${j}].name`, problem));
        if (typeof name === 'string' && declaredFiles.has(dropInPath(name, d.name))) {
          out.push(
            fieldError(
              `${base}.dropIns[${j}].name`,
              `spec.files also writes ${dropInPath(name, d.name)}; keep only one of them`,
            ),
          );
        }
      }
      if (typeof d.content === 'string') {
        const parsed = checkUnitSyntax(d.content, `${base}.dropIns[${j}].content`, out);
        hasReload ||= hasKey(parsed, 'Service', 'ExecReload');
      }
    });
    checkUnitRules(
      {
        filePaths: list(raw.filePaths),
        onChange: raw.onChange,
        mask: raw.mask === true,
        enable: raw.enable === true,
        hasContent,
        hasDropIns: list(raw.dropIns).length > 0,
        hasReload,
      },
      base,
      declaredFiles,
      out,
    );
  });
}

function checkFiles(spec: Obj, out: FieldError[]): void {
  const files = list(spec.files);
  checkDuplicates(files, 'path', 'spec.files', 'file path', out);
  files.forEach((raw, i) => {
    if (!isObj(raw)) return;
    const base = `spec.files[${i}]`;
    if (typeof raw.path === 'string') {
      const problem = checkFilePath(raw.path);
      if (problem) out.push(fieldError(`${base}.path`, problem));
    }
    if (raw.permissions !== undefined) {
      const value = raw.permissions;
      // a valid octal string (checkPermissions says so) is then looked at for what it allows
      const problem =
        checkPermissions(value) ??
        (typeof value === 'string' ? checkModeSafety(parseInt(value, 8)) : undefined);
      if (problem) out.push(fieldError(`${base}.permissions`, problem));
    }
    if (typeof raw.owner === 'string') {
      const [user = '', group] = raw.owner.split(':');
      const problem = checkOwnerIds(user, group ?? user);
      if (problem) out.push(fieldError(`${base}.owner`, problem));
    }
    const content = raw.content;
    if (!isObj(content)) return;
    const sources = ['inline', 'secretRef', 'configMapRef'].filter((k) => content[k] !== undefined);
    if (sources.length !== 1) {
      out.push(
        fieldError(
          `${base}.content`,
          sources.length === 0
            ? 'set one of inline, secretRef, configMapRef'
            : `set exactly one of inline, secretRef, configMapRef (got ${sources.join(' and ')})`,
        ),
      );
    }
    const inline = content.inline;
    if (isObj(inline) && typeof inline.data === 'string') {
      if (inline.data.length > LIMITS.inlineDataBytes) return; // the schema already said so
      const encoding = typeof inline.encoding === 'string' ? inline.encoding : '';
      // Plain text cannot grow past three bytes per character: short text needs no counting.
      if (encoding === '' && inline.data.length * 3 <= LIMITS.secretBytes) return;
      try {
        const size = decodedInlineSize(inline.data, encoding);
        if (size > LIMITS.secretBytes) {
          out.push(
            fieldError(
              `${base}.content.inline.data`,
              `decodes to ${formatBytes(size)}, above the 1 MiB a Kubernetes Secret can hold; ship it in the image instead`,
            ),
          );
        }
      } catch (error) {
        out.push(fieldError(`${base}.content.inline.data`, (error as Error).message));
      }
    }
  });
}

function checkPackages(spec: Obj, out: FieldError[]): void {
  const packages = list(spec.packages);
  checkDuplicates(packages, 'name', 'spec.packages', 'package', out);
  if (typeof spec.type === 'string' && !hasPackageManager(spec.type) && packages.length > 0) {
    out.push(fieldError('spec.packages', noPackageManager(spec.type)));
  }
}

/**
 * Every path the spec makes oscar write (files, unit files, drop-ins) whose own syntax is valid,
 * with its field: what pathConflicts looks at. A resolved config's check collects the same set.
 */
function declaredPaths(spec: Obj): DeclaredPath[] {
  const out: DeclaredPath[] = [];
  list(spec.files).forEach((f, i) => {
    if (isObj(f) && typeof f.path === 'string' && checkFilePath(f.path) === undefined) {
      out.push({ path: f.path, field: `spec.files[${i}].path` });
    }
  });
  list(spec.units).forEach((u, i) => {
    if (!isObj(u) || typeof u.name !== 'string' || validateUnitName(u.name) !== undefined) return;
    const writesUnitFile = typeof u.content === 'string' && u.content !== '' && u.mask !== true;
    const dropIns = list(u.dropIns).map((d) =>
      isObj(d) && typeof d.name === 'string' && validateDropInName(d.name) === undefined
        ? d.name
        : undefined,
    );
    unitPaths(u.name, writesUnitFile, dropIns, `spec.units[${i}]`, out);
  });
  return out;
}

export function deepValidate(spec: Obj): FieldError[] {
  const out: FieldError[] = [];
  const declaredFiles = new Set(
    list(spec.files)
      .map((f) => (isObj(f) ? f.path : undefined))
      .filter((p): p is string => typeof p === 'string'),
  );
  checkFiles(spec, out);
  checkUnits(spec, declaredFiles, out);
  checkPackages(spec, out);
  checkRebootDeclarations(
    {
      purpose: spec.purpose,
      units: list(spec.units).filter(isObj),
      files: list(spec.files).filter(isObj),
    },
    out,
  );
  out.push(...validateRolloutPolicy(spec));
  out.push(...oscarOwnedSpecErrors(spec));
  out.push(...pathConflicts(declaredPaths(spec)));
  return out;
}
