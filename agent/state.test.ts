// last-applied read back: the checked config the agent wrote (or read) is recalled for the same
// bytes — a revert reads last-applied on every drift — and only for the same bytes.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkDesired, isChecked } from './desired-check.js';
import { readLastApplied, writeLastApplied } from './state.js';
import { config, desiredOf, file, unit } from './testing/fixtures.js';

let stateDir: string;

beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'oscar-state-'));
});

afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

const v = (n: string) =>
  desiredOf(config([unit('a.service', { filePaths: ['/etc/a.conf'] })], [file('/etc/a.conf', n)]));

describe('last-applied', () => {
  it('is read back as the checked config written with it; other bytes are read afresh, damage is still damage', async () => {
    const one = v('1');
    checkDesired(one.config, 'test');
    await writeLastApplied(stateDir, one.bytes, one.config);
    const read = await readLastApplied(stateDir);
    expect(read?.config).toBe(one.config);
    expect(read?.checksum).toBe(one.checksum);

    const two = v('2'); // written without its config: parsed when read
    await writeLastApplied(stateDir, two.bytes);
    const again = await readLastApplied(stateDir);
    expect(again?.config).not.toBe(one.config);
    expect(again?.config).toEqual(two.config);
    expect(again?.checksum).toBe(two.checksum);

    // the file is read and hashed every time: bytes changed behind the agent's back are seen
    await writeFile(join(stateDir, 'last-applied.json'), '{"not":');
    await expect(readLastApplied(stateDir)).rejects.toThrow(/last-applied.json is damaged/);
  });

  it('a read marks a valid config checked (its next check is free) unless it names oscar’s own files', async () => {
    await writeLastApplied(stateDir, v('1').bytes);
    const first = await readLastApplied(stateDir);
    if (!first) throw new Error('nothing read');
    expect(isChecked(first.config)).toBe(true);
    expect((await readLastApplied(stateDir))?.config).toBe(first.config); // held: recalled

    const own = desiredOf(config([], [file('/opt/oscar/bin/oscar-agent', 'x')]));
    await writeLastApplied(stateDir, own.bytes);
    const read = await readLastApplied(stateDir); // read as before this change…
    if (!read) throw new Error('nothing read');
    expect(isChecked(read.config)).toBe(false);
    expect(() => checkDesired(read.config, 'last-applied')).toThrow(/oscar/); // …refused as before
  });
});
