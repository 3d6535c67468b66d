/**
 * The conventions every command shares (docs/cli.md): one file given either way, completion
 * generated from the command table, version as data.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { versionInfo } from './commands/version.js';
import { commandTree, completionScript } from './support/completion.js';
import { oneFile } from './support/input.js';
import { buildProgram } from './main.js';

describe('one file, as FILE or -f FILE', () => {
  it('takes either, refuses two different ones and none, naming the way', () => {
    expect(oneFile('render', 'a.yaml', undefined)).toBe('a.yaml');
    expect(oneFile('render', undefined, '-')).toBe('-');
    expect(oneFile('render', 'a.yaml', 'a.yaml')).toBe('a.yaml');
    expect(() => oneFile('plan', 'a.yaml', 'b.yaml')).toThrow(
      'two files given ("b.yaml" with -f and "a.yaml"); plan reads one',
    );
    expect(() => oneFile('plan', undefined, undefined)).toThrow(
      'no file given: oscar plan FILE, or -f FILE',
    );
  });

  it('every command with -f also takes a positional file', () => {
    const withFile = commandTree(buildProgram()).filter((n) =>
      n.flags.some((f) => f.short === '-f'),
    );
    expect(withFile.map((n) => n.path.join(' ')).sort()).toEqual(['plan', 'render', 'validate']);
    const program = buildProgram();
    for (const n of withFile) {
      const command = program.commands.find((c) => c.name() === n.path[0]);
      expect(command?.registeredArguments.length, n.path.join(' ')).toBeGreaterThan(0);
    }
  });
});

/** What bash completes after `words` (the last one being typed). */
function complete(script: string, words: string[]): string[] {
  const line = words.map((w) => `"${w}"`).join(' ');
  const r = spawnSync(
    'bash',
    [
      '-c',
      `${script}\nCOMP_WORDS=(${line}); COMP_CWORD=${String(words.length - 1)}; _oscar_completion; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ],
    { encoding: 'utf8' },
  );
  expect(r.stderr).toBe('');
  return r.stdout.split('\n').filter(Boolean);
}

describe('oscar completion', () => {
  const program = buildProgram();
  const bash = completionScript(program, 'bash');

  it('bash completes commands, subcommands and each command’s own flags', () => {
    const top = complete(bash, ['oscar', '']);
    expect(top).toEqual(program.commands.map((c) => c.name()));
    expect(top).toContain('completion');
    expect(complete(bash, ['oscar', 'rollout', 'st'])).toEqual(['status']);
    expect(complete(bash, ['oscar', 'rollout', 'status', 'w', '--w'])).toEqual(['--watch']);
    expect(complete(bash, ['oscar', 'agent', '--cont'])).toEqual(['--context']);
    expect(complete(bash, ['oscar', 'render', '--ex'])).toEqual(['--explain']);
    expect(complete(bash, ['oscar', 'validate', '--ex'])).toEqual([]); // not validate's
  });

  it('zsh reuses the bash function; fish has a line per command and flag', () => {
    expect(completionScript(program, 'zsh')).toMatch(/^#compdef oscar\n[\s\S]*bashcompinit/);
    const fish = completionScript(program, 'fish');
    expect(fish).toContain("-a rollout -d 'the rollout of a reconcile");
    expect(fish).toContain(
      '__fish_seen_subcommand_from rollout; and not __fish_seen_subcommand_from',
    );
    expect(fish).toMatch(/-n '__fish_seen_subcommand_from plan' -l output -s o -xa 'json yaml'/);
  });
});

describe('oscar version -o json', () => {
  it('gives the versions and the platform as data', () => {
    expect(versionInfo()).toEqual({
      version: expect.stringMatching(/^\d+\.\d+\.\d+/) as unknown,
      apiVersion: 'oscar.dev/v1alpha1',
      node: process.version,
      platform: `${process.platform}/${process.arch}`,
    });
  });
});
