import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { appendFile, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Journal, parseHeader, parseLog } from './journal.js';
import type { Action } from './plan.js';

let stateDir: string;

beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'oscar-journal-'));
  await mkdir(stateDir, { recursive: true });
});

afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

const actions: Action[] = Array.from({ length: 13 }, (_, i) => ({
  kind: 'restart',
  unit: `u${i}.service`,
  reason: 'changed',
}));
const CHECKSUM = 'c'.repeat(64);

/** The lines a journal writes, as they land in journal.log. */
async function lines(steps: (['done', number] | ['begin', number, string])[]): Promise<string> {
  const j = await Journal.start(stateDir, CHECKSUM, actions);
  for (const s of steps) {
    if (s[0] === 'done') await j.done(s[1]);
    else await j.begin(s[1], s[2]);
  }
  await j.close();
  return readFile(join(stateDir, 'journal.log'), 'utf8');
}

describe('the journal log is read strictly', () => {
  it('reads back what it wrote', async () => {
    await lines([
      ['done', 0],
      ['begin', 12, 'abc'],
      ['done', 3],
      ['begin', 4, ''],
    ]);
    const p = await Journal.read(stateDir);
    expect([...(p?.done ?? [])].sort()).toEqual([0, 3]);
    expect([...(p?.begun ?? [])]).toEqual([
      [12, 'abc'],
      [4, ''],
    ]);
  });

  it('a torn last line is not done: "done 12" cut to "done 1" (or to "done ") marks nothing', async () => {
    const log = await lines([
      ['done', 0],
      ['done', 12],
    ]);
    const whole = log.split('\n')[1] ?? '';
    for (const cut of [
      whole.slice(0, whole.indexOf(' done ') + 7),
      whole.slice(0, whole.indexOf(' done ') + 6),
      whole.slice(0, -1),
    ]) {
      const torn = `${log.split('\n')[0] ?? ''}\n${cut}`;
      await writeFile(join(stateDir, 'journal.log'), torn);
      expect([...((await Journal.read(stateDir))?.done ?? [])]).toEqual([0]);
      // even followed by a newline (a power cut that tore the line and another write after it)
      await writeFile(join(stateDir, 'journal.log'), `${torn}\n`);
      expect([...((await Journal.read(stateDir))?.done ?? [])]).toEqual([0]);
    }
  });

  it("ignores a line whose checksum does not match, another plan's lines, and steps past the plan", async () => {
    await lines([['done', 1]]);
    const id = (await Journal.read(stateDir))?.id ?? '';
    const good = (await readFile(join(stateDir, 'journal.log'), 'utf8')).trim();
    await appendFile(join(stateDir, 'journal.log'), `${good.replace(' done 1 ', ' done 2 ')}\n`);
    await appendFile(join(stateDir, 'journal.log'), `${'f'.repeat(16)} done 3 - 00000000\n`);
    await appendFile(join(stateDir, 'journal.log'), `${id} done 99 - 00000000\n`);
    expect([...((await Journal.read(stateDir))?.done ?? [])]).toEqual([1]);
  });

  it('garbage anywhere never marks a step that was not written whole (property)', () => {
    const id = '0123456789abcdef';
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 12 }), { maxLength: 13 }),
        fc.array(
          fc.oneof(
            fc.string(),
            fc.constantFrom(`${id} done `, `${id} done 1`, `${id} begin 2 x`, '\0\0\0'),
          ),
          {
            maxLength: 6,
          },
        ),
        fc.nat(),
        (done, garbage, cutAt) => {
          // the lines a journal writes (through the same formatter) ...
          const whole = done.map((i) => `${id} done ${i} - ${sum(`${id} done ${i} -`)}`);
          // ... interleaved with garbage, and the end torn at any character
          const mixed = whole.flatMap((l, i) => [
            l,
            ...(garbage[i] !== undefined ? [garbage[i]] : []),
          ]);
          const text = `${mixed.join('\n')}\n`;
          const torn = text.slice(0, text.length - (cutAt % Math.max(text.length, 1)));
          const got = parseLog(torn, id, 13).done;
          for (const i of got) expect(done).toContain(i);
          // every line that survived whole, with its newline, still counts
          const intact = torn.split('\n').slice(0, -1);
          for (const i of done) {
            if (intact.includes(`${id} done ${i} - ${sum(`${id} done ${i} -`)}`))
              expect(got.has(i)).toBe(true);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

/** The line checksum, recomputed the way the journal does (first 8 hex of sha256). */
function sum(body: string): string {
  return createHash('sha256').update(body).digest('hex').slice(0, 8);
}

describe('a damaged journal header', () => {
  it.each([
    ['not JSON', '{"id":'],
    [
      'the wrong shape',
      '{"id":"0123456789abcdef","checksum":"' + 'c'.repeat(64) + '","startedAt":"x","actions":3}',
    ],
    [
      'an action of no known kind',
      JSON.stringify({
        id: '0123456789abcdef',
        checksum: 'c'.repeat(64),
        startedAt: 'x',
        actions: [{ kind: 'format-disk' }],
      }),
    ],
    ['a JSON list', '[]'],
  ])(
    '%s: no pending apply, a warning naming the file, and the journal removed',
    async (_, text) => {
      await writeFile(join(stateDir, 'journal.json'), text);
      await writeFile(join(stateDir, 'journal.log'), 'x');
      const warnings: string[] = [];
      expect(await Journal.read(stateDir, (m) => warnings.push(m))).toBeUndefined();
      expect(warnings).toEqual([
        expect.stringContaining(`${join(stateDir, 'journal.json')} is damaged`),
      ]);
      expect(await readdir(stateDir)).toEqual([]);
    },
  );

  it('parseHeader explains what is wrong', () => {
    expect(parseHeader('{"id":"x"}')).toBe('no valid "id"');
    expect(parseHeader('{')).toMatch(/^not JSON/);
  });
});
