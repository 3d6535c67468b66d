// Golden files: every example rendered in each format its type supports must equal
// test/golden/ byte for byte (regenerate with `npm run gen:golden` after an intended change), and
// every golden file must be accepted by the real tool that consumes that format, with no output
// at all (several of them print warnings and still exit 0).
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cloudInitSchema,
  ignitionValidate,
  shNoexec,
  shellcheck,
  stopValidators,
  systemPython,
} from '../test/support/validators.js';
import { missing, requireTool } from '../test/support/tools.js';
import { comparable } from './decode.js';
import { decode, expectedOutcome } from './formats.js';
import { expand } from './profiles.js';
import { resolve } from '../api/resolve.js';
import { goldenDir, goldenEntries, type GoldenEntry } from './testdata/golden.js';

let entries: GoldenEntry[] = [];

beforeAll(async () => {
  entries = await goldenEntries();
});

afterAll(() => {
  stopValidators();
});

describe('golden files', () => {
  it('cover every example in every format its type supports', async () => {
    expect(entries.length).toBeGreaterThanOrEqual(8);
    const onDisk = (await readdir(goldenDir)).filter((n) => n !== 'README.md').sort();
    expect(onDisk).toEqual(entries.map((e) => e.file).sort());
  });

  it('equal the renderers output byte for byte (npm run gen:golden regenerates)', async () => {
    for (const e of entries) {
      const golden = await readFile(join(goldenDir, e.file));
      expect(e.userData.toString('utf8'), `test/golden/${e.file}`).toBe(golden.toString('utf8'));
      expect(e.userData.equals(golden)).toBe(true);
    }
  });

  it('decode back to exactly the example (files, units, packages)', () => {
    for (const e of entries) {
      const resolved = resolve(e.osc.spec);
      if (!resolved.ok) throw new Error(`${e.example} does not resolve`);
      expect(comparable(decode(e.format, e.userData)), e.file).toEqual(
        comparable(expectedOutcome(expand(resolved.config).config, e.format)),
      );
    }
  });
});

describe('golden files pass the real validators with no output', () => {
  it('cloud-config: cloud-init schema', async (ctx) => {
    const ok =
      (existsSync(systemPython) && existsSync('/usr/lib/python3/dist-packages/cloudinit')) ||
      missing('cloud-init python module', 'run hack/deps.sh (Debian package cloud-init)');
    if (!ok) return ctx.skip('cloud-init missing');
    const list = entries.filter((e) => e.format === 'cloud-config');
    expect(list.length).toBeGreaterThan(0);
    for (const e of list) {
      expect(await cloudInitSchema(e.userData.toString('utf8')), e.file).toBe('');
    }
  });

  it('ignition: ignition-validate', async (ctx) => {
    if (!requireTool('ignition-validate')) return ctx.skip('ignition-validate missing');
    const list = entries.filter((e) => e.format === 'ignition');
    expect(list.length).toBeGreaterThan(0);
    for (const e of list)
      expect(await ignitionValidate(e.userData.toString('utf8')), e.file).toBe('');
  });

  it('script: sh -n and shellcheck -S warning', async (ctx) => {
    if (!requireTool('shellcheck')) return ctx.skip('shellcheck missing');
    const list = entries.filter((e) => e.format === 'script');
    expect(list.length).toBeGreaterThan(0);
    for (const e of list) {
      const text = e.userData.toString('utf8');
      expect(await shNoexec(text), e.file).toBe('');
      expect(await shellcheck(text), e.file).toBe('');
    }
  });

  it('the validators do refuse a broken rendering (they are really checking)', async (ctx) => {
    if (!requireTool('shellcheck') || !requireTool('ignition-validate'))
      return ctx.skip('tools missing');
    const script = entries.find((e) => e.format === 'script');
    const ign = entries.find((e) => e.format === 'ignition');
    if (!script || !ign) throw new Error('no script or ignition golden');
    expect(await shNoexec(`${script.userData.toString('utf8')}\nif then\n`)).not.toBe('');
    const broken = JSON.parse(ign.userData.toString('utf8')) as { ignition: { version: string } };
    broken.ignition.version = '3.4.0';
    expect(await ignitionValidate(JSON.stringify(broken))).not.toBe('');
  });
});
