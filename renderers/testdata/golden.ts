/**
 * The golden set: every example in examples/ rendered in each format its type supports. Shared by
 * hack/gen-golden.ts (writes test/golden/) and renderers/golden.test.ts (fails on any diff).
 */
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadDocuments } from '../../api/load.js';
import type { Format, OperatingSystemConfig } from '../../api/schema.js';
import { defaultRegistry, renderDocument } from '../registry.js';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const examplesDir = join(repoRoot, 'examples');
export const goldenDir = join(repoRoot, 'test', 'golden');

export const EXTENSIONS: Record<Format, string> = {
  'cloud-config': 'cloud-config.yaml',
  ignition: 'ign',
  script: 'sh',
};

export interface GoldenEntry {
  example: string;
  osc: OperatingSystemConfig;
  format: Format;
  /** File name in test/golden/. */
  file: string;
  userData: Buffer;
}

export async function loadExamples(): Promise<{ name: string; osc: OperatingSystemConfig }[]> {
  const names = (await readdir(examplesDir)).filter((n) => n.endsWith('.yaml')).sort();
  const out: { name: string; osc: OperatingSystemConfig }[] = [];
  for (const name of names) {
    const [doc] = loadDocuments(await readFile(join(examplesDir, name), 'utf8'));
    if (doc === undefined || doc.errors.length > 0)
      throw new Error(`examples/${name} does not load`);
    out.push({ name: name.replace(/\.yaml$/, ''), osc: doc.value as OperatingSystemConfig });
  }
  return out;
}

export async function goldenEntries(): Promise<GoldenEntry[]> {
  const registry = defaultRegistry();
  const entries: GoldenEntry[] = [];
  for (const { name, osc } of await loadExamples()) {
    const renderer = registry.get(osc.spec.type);
    if (renderer === undefined) throw new Error(`examples/${name}.yaml: no renderer for its type`);
    for (const format of renderer.formats) {
      const r = await renderDocument(registry, osc, undefined, { format });
      if (!r.ok) throw new Error(`examples/${name}.yaml: ${JSON.stringify(r.errors)}`);
      entries.push({
        example: name,
        osc,
        format,
        file: `${name}.${EXTENSIONS[format]}`,
        userData: r.result.userData,
      });
    }
  }
  return entries;
}
