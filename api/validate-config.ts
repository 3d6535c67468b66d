/**
 * The checks of a resolved config (ResolvedConfig): the same rules `oscar validate` applies to an
 * OperatingSystemConfig (api/validate.ts), restated for what survives resolution — paths, modes,
 * owners, unit and drop-in names, unit syntax, packages, limits, and the paths that cannot all be
 * written — without the schema library, so the agent can check every desired state it receives
 * (whatever its source: the reconcile Secret, a local file, its own last-applied record) without
 * loading typebox. The leaf rules are the ones the OSC's checks call (api/paths.ts,
 * api/systemd/unit-name.ts, api/constants.ts); api/validate-config.test.ts holds the two layers to
 * the same verdict over generated configs, hostile ones included.
 */
import { formatBytes } from './bytes.js';
import { hasPackageManager, noPackageManager } from './os-facts.js';
import { checkRebootDeclarations } from './reboot-rules.js';
import { checkUnitRules, nulByteProblem } from './unit-rules.js';
import {
  CGROUP_DRIVERS,
  CRI_NAMES,
  FIELD_LENGTHS,
  FORMATS,
  LIMITS,
  ON_CHANGE,
  PACKAGE_NAME_HINT,
  PATTERNS,
  PURPOSES,
  UNIT_COMMANDS,
} from './constants.js';
import { fieldError, formatFieldError, type FieldError } from './field-error.js';
import {
  checkDropInDirName,
  checkFilePath,
  pathConflicts,
  unitPaths,
  type DeclaredPath,
} from './paths.js';
import { checkModeSafety, checkOwnerIds } from './file-rules.js';
import {
  dropInPath,
  unitPath,
  type ResolvedConfig,
  type ResolvedFile,
  type ResolvedUnit,
} from './resolved.js';
import { hasKey, parseUnitFile, type UnitFileError } from './systemd/unit-file.js';
import { validateDropInName, validateUnitName } from './systemd/unit-name.js';

/** What the checks need to know of a unit file or drop-in text. */
export interface UnitTextFacts {
  readonly errors: readonly UnitFileError[];
  readonly sectionCount: number;
  /** ExecReload= is set in [Service]. */
  readonly execReload: boolean;
}

export function unitTextFacts(text: string): UnitTextFacts {
  const parsed = parseUnitFile(text);
  return {
    errors: parsed.errors,
    sectionCount: parsed.sections.length,
    execReload: hasKey(parsed, 'Service', 'ExecReload'),
  };
}

export interface ValidateConfigOptions {
  /** How unit texts are parsed (the renderers pass a memo); parseUnitFile by default. */
  facts?: (text: string) => UnitTextFacts;
  /**
   * The most files: one OSC's (LIMITS.files, the default), or what a node's agent accepts from
   * its Secret or its own records (NODE_LIMITS.files).
   */
  maxFiles?: number;
}

const TYPE = new RegExp(PATTERNS.type);
const OWNER = new RegExp(PATTERNS.owner);
const PACKAGE_NAME = new RegExp(PATTERNS.packageName);
const PACKAGE_VERSION = new RegExp(PATTERNS.packageVersion);

const oneOf = (values: readonly string[]): string => values.map((v) => `"${v}"`).join(', ');

function tooMany(count: number, limit: number): string {
  return `has ${count} items; at most ${limit} are allowed`;
}

function checkFiles(config: ResolvedConfig, maxFiles: number, out: FieldError[]): void {
  const files = config.files;
  if (files.length > maxFiles) out.push(fieldError('spec.files', tooMany(files.length, maxFiles)));
  const first = new Map<string, number>();
  for (let i = 0; i < files.length; i++) {
    const file = files[i];
    if (file === undefined) continue;
    // field paths are built only for a file that has a problem: most configs have none
    const base = (): string => `spec.files[${i}]`;
    const path = file.path;
    const problem =
      typeof path !== 'string'
        ? 'must be a string'
        : path.length > LIMITS.pathLength
          ? `must have at most ${LIMITS.pathLength} characters`
          : checkFilePath(path);
    if (problem) out.push(fieldError(`${base()}.path`, problem));
    const seen = first.get(path);
    if (seen === undefined) first.set(path, i);
    else {
      out.push(
        fieldError(
          `${base()}.path`,
          `duplicate file path "${path}" (also at spec.files[${seen}]); merge them into one entry`,
        ),
      );
    }
    if (!Number.isInteger(file.mode) || file.mode < 0 || file.mode > 0o7777) {
      out.push(
        fieldError(`${base()}.permissions`, 'must be an octal mode between "0000" and "07777"'),
      );
    } else if ((file.mode & UNSAFE_MODE_BITS) !== 0) {
      const unsafe = checkModeSafety(file.mode);
      if (unsafe) out.push(fieldError(`${base()}.permissions`, unsafe));
    }
    checkOwner(file, base, out);
    if (file.onChange !== undefined && (file.onChange as string) !== 'reboot') {
      out.push(fieldError(`${base()}.onChange`, 'must be "reboot" when set (omit it for none)'));
    }
    if (!Buffer.isBuffer(file.content)) {
      out.push(fieldError(`${base()}.content`, 'must be bytes'));
    } else if (file.content.length > LIMITS.secretBytes) {
      out.push(
        fieldError(
          `${base()}.content`,
          `is ${formatBytes(file.content.length)}, above the 1 MiB a Kubernetes Secret can hold; ship it in the image instead`,
        ),
      );
    }
  }
}

/** Bits of which at least one is set in every mode checkModeSafety refuses. */
const UNSAFE_MODE_BITS = 0o002 | 0o020;

function checkOwner(file: ResolvedFile, base: () => string, out: FieldError[]): void {
  if (file.user === 'root' && file.group === 'root') return;
  const owner = `${file.user}:${file.group}`;
  if (
    typeof file.user !== 'string' ||
    typeof file.group !== 'string' ||
    owner.length > FIELD_LENGTHS.owner ||
    !OWNER.test(owner)
  ) {
    out.push(
      fieldError(
        `${base()}.owner`,
        `"${owner}" must be "user:group" or "user" (names or numeric ids), such as "root:root" or "1000:1000"`,
      ),
    );
    return;
  }
  const ids = checkOwnerIds(file.user, file.group);
  if (ids) out.push(fieldError(`${base()}.owner`, ids));
}

function checkUnit(
  unit: ResolvedUnit,
  base: string,
  files: ReadonlySet<string>,
  facts: (text: string) => UnitTextFacts,
  out: FieldError[],
): void {
  const nameOk = checkUnitName(unit, base, files, out);
  if (!UNIT_COMMANDS.includes(unit.command)) {
    out.push(fieldError(`${base}.command`, `must be one of ${oneOf(UNIT_COMMANDS)}`));
  }
  if (!ON_CHANGE.includes(unit.onChange)) {
    out.push(fieldError(`${base}.onChange`, `must be one of ${oneOf(ON_CHANGE)}`));
  }
  const content = unit.content;
  const hasContent = content !== undefined && content.length > 0;
  const contentReloads = checkUnitContent(content, base, facts, out);
  const dropInsReload = checkDropIns(unit, base, nameOk ? files : undefined, facts, out);
  if (unit.filePaths.length > LIMITS.filePaths) {
    out.push(fieldError(`${base}.filePaths`, tooMany(unit.filePaths.length, LIMITS.filePaths)));
  }
  checkUnitRules(
    {
      filePaths: unit.filePaths,
      onChange: unit.onChange,
      mask: unit.mask,
      enable: unit.enable,
      hasContent,
      hasDropIns: unit.dropIns.length > 0,
      hasReload: contentReloads || dropInsReload,
    },
    base,
    files,
    out,
  );
}

/**
 * A valid unit name that spec.files does not also write, with a drop-in directory name when it
 * has drop-ins. True when the name itself is valid.
 */
function checkUnitName(
  unit: ResolvedUnit,
  base: string,
  files: ReadonlySet<string>,
  out: FieldError[],
): boolean {
  const nameProblem = validateUnitName(unit.name);
  if (nameProblem) {
    out.push(fieldError(`${base}.name`, nameProblem));
    return false;
  }
  if (files.has(unitPath(unit.name))) {
    out.push(
      fieldError(
        `${base}.name`,
        `spec.files also writes ${unitPath(unit.name)}; declare the unit's content here and remove that file`,
      ),
    );
  }
  if (unit.dropIns.length > 0) {
    const dirProblem = checkDropInDirName(unit.name);
    if (dirProblem) out.push(fieldError(`${base}.name`, dirProblem));
  }
  return true;
}

/** The unit's own content: within the limit, parsed, with a section. True when it has ExecReload. */
function checkUnitContent(
  content: string | undefined,
  base: string,
  facts: (text: string) => UnitTextFacts,
  out: FieldError[],
): boolean {
  if (content === undefined || content.length === 0) return false;
  if (content.length > LIMITS.unitContentBytes) {
    out.push(
      fieldError(`${base}.content`, `must have at most ${LIMITS.unitContentBytes} characters`),
    );
    return false;
  }
  const f = facts(content);
  for (const e of f.errors) out.push(fieldError(`${base}.content`, `line ${e.line}: ${e.message}`));
  const nul = nulByteProblem(content);
  if (nul) out.push(fieldError(`${base}.content`, nul));
  if (f.sectionCount === 0 && f.errors.length === 0) {
    out.push(
      fieldError(
        `${base}.content`,
        'has no [Section]; a unit file needs at least [Unit] or [Service]',
      ),
    );
  }
  return f.execReload;
}

/**
 * The drop-ins: how many, valid unique names spec.files does not also write (`files` undefined
 * when the unit's own name is invalid: no path to compare), contents within the limit and
 * parsed. True when one has ExecReload.
 */
function checkDropIns(
  unit: ResolvedUnit,
  base: string,
  files: ReadonlySet<string> | undefined,
  facts: (text: string) => UnitTextFacts,
  out: FieldError[],
): boolean {
  if (unit.dropIns.length > LIMITS.dropIns) {
    out.push(fieldError(`${base}.dropIns`, tooMany(unit.dropIns.length, LIMITS.dropIns)));
  }
  let hasReload = false;
  const firstDropIn = new Map<string, number>();
  unit.dropIns.forEach((d, j) => {
    const field = `${base}.dropIns[${j}]`;
    const problem = validateDropInName(d.name);
    if (problem) out.push(fieldError(`${field}.name`, problem));
    else if (files?.has(dropInPath(unit.name, d.name))) {
      out.push(
        fieldError(
          `${field}.name`,
          `spec.files also writes ${dropInPath(unit.name, d.name)}; keep only one of them`,
        ),
      );
    }
    const seen = firstDropIn.get(d.name);
    if (seen === undefined) firstDropIn.set(d.name, j);
    else {
      out.push(
        fieldError(
          `${field}.name`,
          `duplicate drop-in name "${d.name}" (also at ${base}.dropIns[${seen}]); merge them into one entry`,
        ),
      );
    }
    if (d.content.length > LIMITS.unitContentBytes) {
      out.push(
        fieldError(`${field}.content`, `must have at most ${LIMITS.unitContentBytes} characters`),
      );
      return;
    }
    const f = facts(d.content);
    for (const e of f.errors)
      out.push(fieldError(`${field}.content`, `line ${e.line}: ${e.message}`));
    const nul = nulByteProblem(d.content);
    if (nul) out.push(fieldError(`${field}.content`, nul));
    hasReload ||= f.execReload;
  });
  return hasReload;
}

function checkUnits(
  config: ResolvedConfig,
  facts: (text: string) => UnitTextFacts,
  out: FieldError[],
): void {
  const units = config.units;
  if (units.length > LIMITS.units)
    out.push(fieldError('spec.units', tooMany(units.length, LIMITS.units)));
  const files = new Set(config.files.map((f) => f.path));
  const first = new Map<string, number>();
  units.forEach((unit, i) => {
    const base = `spec.units[${i}]`;
    checkUnit(unit, base, files, facts, out);
    const seen = first.get(unit.name);
    if (seen === undefined) first.set(unit.name, i);
    else {
      out.push(
        fieldError(
          `${base}.name`,
          `duplicate unit name "${unit.name}" (also at spec.units[${seen}]); merge them into one entry`,
        ),
      );
    }
  });
}

function checkPackages(config: ResolvedConfig, out: FieldError[]): void {
  const packages = config.packages;
  if (packages.length > LIMITS.packages) {
    out.push(fieldError('spec.packages', tooMany(packages.length, LIMITS.packages)));
  }
  const first = new Map<string, number>();
  packages.forEach((p, i) => {
    const base = `spec.packages[${i}]`;
    if (p.name.length > FIELD_LENGTHS.packageName || !PACKAGE_NAME.test(p.name)) {
      out.push(fieldError(`${base}.name`, PACKAGE_NAME_HINT));
    }
    if (
      p.version !== undefined &&
      (p.version.length > FIELD_LENGTHS.packageVersion || !PACKAGE_VERSION.test(p.version))
    ) {
      out.push(
        fieldError(
          `${base}.version`,
          'must be a package version such as "1.7.12-1" or "1.31.2-1.1"',
        ),
      );
    }
    const seen = first.get(p.name);
    if (seen === undefined) first.set(p.name, i);
    else {
      out.push(
        fieldError(
          `${base}.name`,
          `duplicate package "${p.name}" (also at spec.packages[${seen}]); merge them into one entry`,
        ),
      );
    }
  });
  if (!hasPackageManager(config.type) && packages.length > 0) {
    out.push(fieldError('spec.packages', noPackageManager(config.type)));
  }
}

/** The paths the config makes oscar write, as the OSC's check collects them (api/deep-validate.ts). */
function declaredPaths(config: ResolvedConfig): DeclaredPath[] {
  const out: DeclaredPath[] = [];
  config.files.forEach((f, i) => {
    if (checkFilePath(f.path) === undefined)
      out.push({ path: f.path, field: `spec.files[${i}].path` });
  });
  config.units.forEach((u, i) => {
    if (validateUnitName(u.name) !== undefined) return;
    const dropIns = u.dropIns.map((d) =>
      validateDropInName(d.name) === undefined ? d.name : undefined,
    );
    const writesUnitFile = u.content !== undefined && u.content !== '' && !u.mask;
    unitPaths(u.name, writesUnitFile, dropIns, `spec.units[${i}]`, out);
  });
  return out;
}

/**
 * Every problem of a resolved config, as field errors in the OSC's terms (spec.files[2].path):
 * none means the config is what `oscar validate` would have let through.
 */
export function validateConfig(
  config: ResolvedConfig,
  opts: ValidateConfigOptions = {},
): FieldError[] {
  const facts = opts.facts ?? unitTextFacts;
  const out: FieldError[] = [];
  if (
    typeof config.type !== 'string' ||
    config.type.length > FIELD_LENGTHS.type ||
    !TYPE.test(config.type)
  ) {
    out.push(
      fieldError(
        'spec.type',
        'must be a lowercase OS name made of a-z, 0-9 and "-", such as "ubuntu" or "flatcar"',
      ),
    );
  }
  if (!PURPOSES.includes(config.purpose)) {
    out.push(fieldError('spec.purpose', `must be one of ${oneOf(PURPOSES)}`));
  }
  if (config.format !== undefined && !FORMATS.includes(config.format)) {
    out.push(fieldError('spec.format', `must be one of ${oneOf(FORMATS)}`));
  }
  if (config.cri !== undefined) {
    if (!CRI_NAMES.includes(config.cri.name)) {
      out.push(fieldError('spec.cri.name', `must be one of ${oneOf(CRI_NAMES)}`));
    }
    if (!CGROUP_DRIVERS.includes(config.cri.cgroupDriver)) {
      out.push(fieldError('spec.cri.cgroupDriver', `must be one of ${oneOf(CGROUP_DRIVERS)}`));
    }
  }
  checkFiles(config, opts.maxFiles ?? LIMITS.files, out);
  checkUnits(config, facts, out);
  checkPackages(config, out);
  checkRebootDeclarations(config, out);
  out.push(...pathConflicts(declaredPaths(config)));
  return out;
}

/**
 * A desired state that breaks oscar's rules: refused before anything is planned, reported as
 * InvalidConfig; the node keeps its last good state.
 */
export class InvalidConfigError extends Error {
  constructor(
    /** Where the config came from: "Secret ns/name", "file /etc/oscar/config.json". */
    readonly origin: string,
    readonly errors: readonly FieldError[],
  ) {
    const shown = errors.slice(0, 20).map(formatFieldError);
    if (errors.length > shown.length) shown.push(`… and ${errors.length - shown.length} more`);
    super(
      `the config from ${origin} is invalid, so it is not applied (the last good state stays):\n  ${shown.join('\n  ')}`,
    );
    this.name = 'InvalidConfigError';
  }
}

/** Throws InvalidConfigError when `config` has any problem; returns it otherwise. */
export function assertValidConfig(
  config: ResolvedConfig,
  origin: string,
  opts: ValidateConfigOptions = {},
): ResolvedConfig {
  const errors = validateConfig(config, opts);
  if (errors.length > 0) throw new InvalidConfigError(origin, errors);
  return config;
}
