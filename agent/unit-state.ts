/**
 * systemd's view of the declared units, for the drift check and the planner: one
 * `systemctl show` for all of them (a few milliseconds of CPU), run when the watcher sees a unit
 * directory change (a start or stop rewrites /run/systemd/units/invocation:UNIT, an enable or
 * disable a .wants/ link, a mask a link to /dev/null) and at every audit — never on a
 * per-second timer.
 */
import { runCommand } from './systemd.js';
import type { ObservedUnit, UnitStateReader } from './model/observed.js';

export type { UnitStateReader } from './model/observed.js';

export const SHOW_PROPERTIES = [
  'Id',
  'LoadState',
  'ActiveState',
  'SubState',
  'UnitFileState',
  'Result',
  'Type',
  'RemainAfterExit',
] as const;

/** `systemctl show` output for several units: blocks in the order asked, "Key=value" lines. */
export function parseShow(text: string, units: readonly string[]): Map<string, ObservedUnit> {
  const out = new Map<string, ObservedUnit>();
  const blocks = text.split(/\n\n+/).filter((b) => b.trim() !== '');
  if (blocks.length !== units.length) {
    throw new Error(
      `systemctl show answered for ${String(blocks.length)} unit(s), asked for ${String(units.length)}`,
    );
  }
  blocks.forEach((block, i) => {
    const p = new Map<string, string>();
    for (const line of block.split('\n')) {
      const eq = line.indexOf('=');
      if (eq > 0) p.set(line.slice(0, eq), line.slice(eq + 1));
    }
    const unit = units[i] as string;
    out.set(unit, {
      load: p.get('LoadState') ?? '',
      active: p.get('ActiveState') ?? '',
      sub: p.get('SubState') ?? '',
      fileState: p.get('UnitFileState') ?? '',
      result: p.get('Result') ?? '',
      restsInactive: p.get('Type') === 'oneshot' && p.get('RemainAfterExit') !== 'yes',
    });
  });
  return out;
}

export class SystemctlUnitStates implements UnitStateReader {
  constructor(
    private readonly systemctl = 'systemctl',
    private readonly timeoutMs = 15_000,
  ) {}

  async read(units: readonly string[]): Promise<Map<string, ObservedUnit>> {
    if (units.length === 0) return new Map();
    const r = await runCommand(
      this.systemctl,
      ['show', `--property=${SHOW_PROPERTIES.join(',')}`, '--', ...units],
      this.timeoutMs,
    );
    if (r.code !== 0) {
      throw new Error(
        `systemctl show failed (exit ${r.code ?? 'timeout'}): ${r.stderr.trim() || r.stdout.trim()}`,
      );
    }
    return parseShow(r.stdout, units);
  }
}
