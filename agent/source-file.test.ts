import { mkdtemp, rm, writeFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { canonicalize } from '../api/canonical.js';
import { desiredFromText } from './desired.js';
import { FileSource } from './source-file.js';
import type { Desired } from './state.js';
import { saveInTwoParts } from './testing/editor.js';
import { config, file } from './testing/fixtures.js';

const osc = (data: string): string => `apiVersion: oscar.dev/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: local
  namespace: default
spec:
  type: generic
  purpose: reconcile
  files:
    - path: /etc/x.conf
      permissions: '0600'
      content:
        inline:
          data: ${JSON.stringify(data)}
`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-src-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function until<T>(f: () => T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('desiredFromText', () => {
  it('resolves OSC YAML and takes canonical JSON as is', async () => {
    const fromYaml = await desiredFromText(osc('a'), 'x.yaml');
    expect(fromYaml.config.files[0]).toMatchObject({ path: '/etc/x.conf', mode: 0o600 });
    const text = canonicalize(config([], [file('/etc/y', 'y')]));
    const fromJson = await desiredFromText(text, 'y.json');
    expect(fromJson.bytes.toString()).toBe(text);
    expect(fromJson.config.files[0]?.content.toString()).toBe('y');
  });

  it('names the file, document and field of a problem, and refuses secretRef locally with the fix', async () => {
    await expect(desiredFromText(osc('a').replace("'0600'", '0600'), 'bad.yaml')).rejects.toThrow(
      /bad\.yaml:11: spec\.files\[0\]\.permissions/, // the line of the field
    );
    const withRef = osc('a').replace(/inline:\n\s+data: "a"/, 'secretRef: {name: s, key: k}');
    await expect(desiredFromText(withRef, 'ref.yaml')).rejects.toThrow(
      /cannot reference Secrets or ConfigMaps: inline the content/,
    );
  });
});

describe('FileSource', () => {
  it('delivers the file, then every saved change (also a rename-over save), and reports a broken file without delivering it', async () => {
    const path = join(dir, 'osc.yaml');
    await writeFile(path, osc('one'));
    const got: Desired[] = [];
    const errors: Error[] = [];
    const source = new FileSource(path, { debounceMs: 50 });
    await source.start({ onDesired: (d) => got.push(d), onError: (e) => errors.push(e) });
    try {
      expect(got.map((d) => d.config.files[0]?.content.toString())).toEqual(['one']);
      await writeFile(path, osc('two'));
      await until(() => (got.length === 2 ? true : undefined));
      await writeFile(path, 'spec: [unclosed');
      await until(() => (errors.length === 1 ? true : undefined));
      expect(errors[0]?.message).toMatch(/YAML syntax error/);
      await writeFile(join(dir, 'tmp'), osc('three'));
      await rename(join(dir, 'tmp'), path);
      await until(() => (got.length === 3 ? true : undefined));
      expect(got.map((d) => d.config.files[0]?.content.toString())).toEqual([
        'one',
        'two',
        'three',
      ]);
      // the same content again is not delivered twice
      await writeFile(path, osc('three'));
      await new Promise((r) => setTimeout(r, 400));
      expect(got).toHaveLength(3);
    } finally {
      await source.stop();
    }
  });

  it('a file saved in two writes is delivered whole, never its (valid) first half', async () => {
    const path = join(dir, 'osc.yaml');
    const two = (data: string): string =>
      `${osc(data)}    - path: /etc/y.conf\n      content:\n        inline:\n          data: "y"\n`;
    await writeFile(path, two('one'));
    const got: Desired[] = [];
    const source = new FileSource(path, { debounceMs: 50 });
    await source.start({ onDesired: (d) => got.push(d), onError: () => undefined });
    try {
      const next = two('two');
      const cut = next.indexOf('    - path: /etc/y.conf');
      await saveInTwoParts(path, next.slice(0, cut), next.slice(cut), 250);
      await until(() => (got.length === 2 ? true : undefined));
      await new Promise((r) => setTimeout(r, 800));
      expect(got.map((d) => d.config.files.map((f) => f.path).join(' '))).toEqual([
        '/etc/x.conf /etc/y.conf',
        '/etc/x.conf /etc/y.conf',
      ]);
    } finally {
      await source.stop();
    }
  });
});
