import { describe, expect, it } from 'vitest';
import { FORMATS } from '../../api/schema.js';
import { DEFAULT_HOOK_SLOTS } from '../../controller/extension/server.js';
import { DEFAULT_RENDER_SLOTS, RENDER_PATH } from '../../renderers/webhook/server.js';
import { buildProgram } from '../main.js';
import { FORMATS_HELP, RENDER_PATH_HELP } from './index.js';

function helpOf(...path: string[]): string {
  let command = buildProgram();
  for (const name of path) {
    const sub = command.commands.find((c) => c.name() === name);
    if (!sub) throw new Error(`no command ${path.join(' ')}`);
    command = sub;
  }
  return command.helpInformation();
}

describe('the command table', () => {
  it('spells out the constants it must not import (the schema, the webhook server) as they are', () => {
    expect(FORMATS_HELP).toBe(FORMATS.join(', '));
    expect(RENDER_PATH_HELP).toBe(RENDER_PATH);
    const flat = (text: string): string => text.replace(/\s+/g, ' ');
    expect(flat(helpOf('render'))).toContain(`overriding spec.format (${FORMATS.join(', ')})`);
    expect(flat(helpOf('renderer', 'serve'))).toContain(`POST ${RENDER_PATH}, GET /healthz`);
  });

  it('lists every command with its options, without running any', () => {
    expect(
      buildProgram()
        .commands.map((c) => c.name())
        .sort(),
    ).toEqual(
      [
        'agent',
        'capi',
        'completion',
        'controller',
        'crd',
        'extension',
        'plan',
        'render',
        'renderer',
        'rollout',
        'up',
        'user-data',
        'validate',
        'version',
      ].sort(),
    );
    expect(helpOf('agent')).toMatch(/--secret <name>[\s\S]*--poll-interval <seconds>[\s\S]*--once/);
    expect(helpOf('controller')).toMatch(/--leader-elect[\s\S]*--renderers-config <path>/);
    expect(helpOf('up')).toMatch(/folder of OSC YAML files \(default: "examples"\)/);
    expect(helpOf('controller')).toMatch(
      /--no-bootstrap[\s\S]*--agent-url <url>[\s\S]*--agent-sha256 <hex>[\s\S]*--bootstrap-token-ttl <duration>/,
    );
    expect(helpOf('render')).toMatch(/--values <key=value\.\.\.>[\s\S]*--machine <name>/);
    expect(helpOf('user-data')).toMatch(/--namespace <ns>[\s\S]*--out <file>/);
    expect(helpOf('agent')).toMatch(/--osc <name>/);
    for (const sub of ['status', 'pause', 'resume', 'undo']) {
      expect(helpOf('rollout', sub)).toMatch(/-n, --namespace <ns>/);
    }
    expect(helpOf('rollout', 'undo')).toMatch(/--to-revision <n>/);
    expect(helpOf('extension', 'serve')).toMatch(
      /--kubeconfig <path>[\s\S]*--listen <addr>[\s\S]*--tls-cert <path>[\s\S]*--tls-key <path>/,
    );
  });

  it('shows examples in the help of every command', () => {
    const program = buildProgram();
    const leaves = program.commands.flatMap((c) => (c.commands.length > 0 ? c.commands : [c]));
    expect(leaves.length).toBeGreaterThanOrEqual(9);
    for (const command of leaves) {
      const help = (() => {
        let text = '';
        command.configureOutput({ writeOut: (s) => (text += s) });
        command.outputHelp();
        return text;
      })();
      expect(help, command.name()).toMatch(/\nExamples:\n {2}oscar /);
    }
  });

  it('says the kubeconfig search order the code uses, and the real --concurrency default', () => {
    const flat = (text: string): string => text.replace(/\s+/g, ' ');
    for (const command of ['controller', 'agent']) {
      expect(flat(helpOf(command))).toContain(
        'default: $KUBECONFIG, ~/.kube/config, then the in-cluster ServiceAccount',
      );
    }
    expect(flat(helpOf('controller'))).toMatch(/--concurrency <n> .* \(default: "16"\)/);
    // the servers' limits: the command table spells them out without loading the servers
    expect(flat(helpOf('renderer', 'serve'))).toMatch(
      new RegExp(`--concurrency <n> .* \\(default: "${String(DEFAULT_RENDER_SLOTS)}"\\)`),
    );
    expect(flat(helpOf('extension', 'serve'))).toMatch(
      new RegExp(`--concurrency <n> .* \\(default: "${String(DEFAULT_HOOK_SLOTS)}"\\)`),
    );
  });

  it('render -o takes a form, and an old `-o FILE` is told to use --out', async () => {
    let err = '';
    const program = buildProgram().exitOverride();
    program.configureOutput({ writeErr: (s) => (err += s) });
    for (const c of program.commands)
      c.exitOverride().configureOutput({ writeErr: (s) => (err += s) });
    await expect(
      program.parseAsync(['node', 'oscar', 'render', '-f', 'x.yaml', '-o', 'user-data']),
    ).rejects.toThrow();
    expect(err).toContain('to write the user data to "user-data" use --out user-data');
  });

  it('runs a command through its lazily loaded implementation', async () => {
    const lines: string[] = [];
    const log = console.log;
    console.log = (...a: unknown[]) => lines.push(a.join(' '));
    try {
      await buildProgram().parseAsync(['node', 'oscar', 'version']);
    } finally {
      console.log = log;
    }
    expect(lines.join('\n')).toMatch(/^oscar \d+\.\d+\.\d+ \(api oscar\.dev\/v1alpha1, node v/);
  });
});
