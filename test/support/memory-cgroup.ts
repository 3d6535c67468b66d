/**
 * A real memory limit for a process a test started: a cgroup of its own (v1 `memory` controller
 * or v2 `memory.max`) with the limit a Deployment ships, so a test sees the kernel enforce it (an
 * OOM kill) instead of comparing a peak RSS with the number. Needs root and a writable cgroup
 * hierarchy; `memoryCgroup` returns undefined (through `missing`: a failure with CI=true) when
 * there is none.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { missing } from './tools.js';

const ROOT = '/sys/fs/cgroup';

export interface MemoryCgroup {
  path: string;
  /**
   * The command line that runs `argv` inside the group from its first instruction (memory a
   * process used before it moved in stays charged where it was: newer kernels no longer move it).
   */
  wrap(argv: string[]): string[];
  /** OOM kills in the group so far. */
  oomKills(): number;
  /** The group's peak memory use in bytes (v1 max_usage_in_bytes, v2 memory.peak). */
  peak(): number;
  /** Removes the group once its processes are gone (a killed one takes a moment to leave). */
  remove(): Promise<void>;
}

function v2(): boolean {
  return existsSync(join(ROOT, 'cgroup.controllers'));
}

function counter(file: string, key: string): number {
  const line = readFileSync(file, 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${key} `));
  return Number(line?.split(' ')[1] ?? 0);
}

/** A new cgroup `name` limited to `bytes` (swap included where the kernel accounts it). */
export function memoryCgroup(name: string, bytes: number): MemoryCgroup | undefined {
  const isV2 = v2();
  const path = isV2 ? join(ROOT, name) : join(ROOT, 'memory', name);
  try {
    mkdirSync(path);
    if (isV2) {
      writeFileSync(join(path, 'memory.max'), String(bytes));
      if (existsSync(join(path, 'memory.swap.max'))) {
        writeFileSync(join(path, 'memory.swap.max'), '0');
      }
    } else {
      writeFileSync(join(path, 'memory.limit_in_bytes'), String(bytes));
      if (existsSync(join(path, 'memory.memsw.limit_in_bytes'))) {
        writeFileSync(join(path, 'memory.memsw.limit_in_bytes'), String(bytes));
      }
    }
  } catch (error) {
    if (existsSync(path)) rmdirSync(path);
    missing(
      'a writable memory cgroup',
      `${path}: ${(error as Error).message} (run as root with cgroup v1 memory or cgroup v2 mounted at ${ROOT})`,
    );
    return undefined;
  }
  return {
    path,
    wrap(argv) {
      return [
        'sh',
        '-c',
        'echo $$ > "$1" && shift && exec "$@"',
        'sh',
        join(path, 'cgroup.procs'),
        ...argv,
      ];
    },
    oomKills() {
      return isV2
        ? counter(join(path, 'memory.events'), 'oom_kill')
        : counter(join(path, 'memory.oom_control'), 'oom_kill');
    },
    peak() {
      const file = isV2 ? 'memory.peak' : 'memory.max_usage_in_bytes';
      return Number(readFileSync(join(path, file), 'utf8').trim());
    },
    async remove() {
      for (let tries = 0; ; tries++) {
        try {
          rmdirSync(path);
          return;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EBUSY' || tries >= 50) throw error;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    },
  };
}
