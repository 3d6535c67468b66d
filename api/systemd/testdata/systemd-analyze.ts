// Test helper: ask the real systemd parser about a unit file through `systemd-analyze verify`,
// which loads the unit without needing systemd as PID 1 (~50 ms per call).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface AnalyzeDiagnostic {
  line: number;
  message: string;
}

const probe = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });

/** Whether `systemd-analyze` can run here. */
export const haveSystemdAnalyze = probe.status === 0;

/**
 * Why tests that need the tool cannot run, or `undefined` when they can. Under CI=true a missing
 * tool is a failure (the caller throws this text), outside CI the caller may skip with it.
 */
export const systemdAnalyzeMissing = haveSystemdAnalyze
  ? undefined
  : 'systemd-analyze is not installed (Debian package systemd); it is the oracle for these tests';

/** Per-line diagnostics systemd prints for `text` saved as `name` (a unit file name). */
export function analyzeUnitFile(text: string, name = 'oscar-test.service'): AnalyzeDiagnostic[] {
  const dir = mkdtempSync(join(tmpdir(), 'oscar-sd-'));
  try {
    const file = join(dir, name);
    writeFileSync(file, text);
    const r = spawnSync('systemd-analyze', ['verify', '--man=no', file], {
      encoding: 'utf8',
      cwd: dir,
    });
    const out: AnalyzeDiagnostic[] = [];
    const prefix = `${file}:`;
    for (const l of `${r.stdout}\n${r.stderr}`.split('\n')) {
      if (!l.startsWith(prefix)) continue;
      const rest = l.slice(prefix.length);
      const colon = rest.indexOf(': ');
      const line = Number(rest.slice(0, colon));
      if (colon < 0 || !Number.isInteger(line)) continue;
      out.push({ line, message: rest.slice(colon + 2) });
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The rvalues systemd rejected for `Restart=`, in file order; systemd echoes them verbatim. */
export function rejectedRestartValues(diags: readonly AnalyzeDiagnostic[]): string[] {
  const marker = 'Failed to parse service restart specifier, ignoring: ';
  return diags
    .filter((d) => d.message.startsWith(marker))
    .sort((a, b) => a.line - b.line)
    .map((d) => d.message.slice(marker.length));
}
