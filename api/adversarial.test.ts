/**
 * A tenant's attacks on a node through what it may write, tried as classes (issue 28/29 hardening):
 * each refusal is checked in both layers — the OSC's checks (`oscar validate`, the controller) and a
 * resolved config's (the agent, on whatever reaches it) — with a positive control beside it.
 */
import { describe, expect, it } from 'vitest';
import { documentOf } from './testing/configs.js';
import type { ResolvedConfig, ResolvedPackage } from './resolved.js';
import { validateConfig } from './validate-config.js';
import { validateOperatingSystemConfig } from './validate.js';

function config(extra: Partial<ResolvedConfig>): ResolvedConfig {
  return { type: 'ubuntu', purpose: 'reconcile', units: [], files: [], packages: [], ...extra };
}

/** Both layers' errors for one config: the OSC's and the resolved config's. */
function bothLayers(c: ResolvedConfig): { osc: string[]; resolved: string[] } {
  const show = (errors: readonly { path: string; message: string }[]) =>
    errors.map((e) => `${e.path}: ${e.message}`);
  return {
    osc: show(validateOperatingSystemConfig(documentOf(c))),
    resolved: show(validateConfig(c)),
  };
}

describe('package names apt-get reads as something else', () => {
  const packages = (...names: string[]): ResolvedPackage[] => names.map((name) => ({ name }));

  it.each([
    // apt-get install -y NAME- removes NAME (checked: apt-get -s install openssh-client- → Remv)
    ['a removal', 'openssh-server-'],
    ['an option', '-o'],
    ['a long option', '--allow-unauthenticated'],
    ['a version pin in the name', 'tar=1.0'],
    ['a release in the name', 'tar/bookworm'],
    ['a glob', 'ssh*'],
    ['a regular expression anchor', '^ssh'],
    ['two names', 'tar jq'],
  ])('%s ("%s") is refused, naming the field', (_, name) => {
    const { osc, resolved } = bothLayers(config({ packages: packages(name) }));
    for (const errors of [osc, resolved]) {
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(/^spec\.packages\[0\]\.name: must be a package name/);
    }
    expect(resolved[0]).toMatch(/apt-get reads "NAME-" as "remove NAME"/);
  });

  it('real names pass: "+" (g++), "." (python3.11), "-" inside, one character', () => {
    const c = config({ packages: packages('g++', 'libstdc++6', 'python3.11', 'kube-proxy', 'r') });
    expect(bothLayers(c)).toEqual({ osc: [], resolved: [] });
  });
});
