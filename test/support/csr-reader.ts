// The Go half of the CSR differential test: hack/csr-reader (kube-apiserver's and the signer's
// reading of spec.request) built into the test cache, fed many inputs per process.
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { missing, repoRoot } from './tools.js';

export interface GoReading {
  ok: boolean;
  error?: string;
  subject?: { type: string; value: string }[];
  extensions?: string[];
  sans: number;
  signatureValid: boolean;
}

/** The reader's path, or undefined (outside CI) when Go is missing; throws in CI. */
export function goCsrReader(): string | undefined {
  try {
    return execFileSync('bash', [join(repoRoot, 'hack/csr-reader/build.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }).trim();
  } catch (error) {
    const status = (error as { status?: number }).status;
    if (status === 3) {
      missing('go', 'install Go >= 1.24 (hack/deps.sh)');
      return undefined;
    }
    throw error;
  }
}

/** Go's reading of each input, in order (one process for all of them). */
export function readWithGo(reader: string, inputs: readonly Buffer[]): GoReading[] {
  const stdin = inputs.map((b) => b.toString('base64')).join('\n') + '\n';
  const run = spawnSync(reader, [], { input: stdin, encoding: 'utf8', maxBuffer: 256 << 20 });
  if (run.status !== 0) throw new Error(`csr-reader failed: ${run.stderr}`);
  const lines = run.stdout.trim().split('\n');
  if (lines.length !== inputs.length) {
    throw new Error(`csr-reader answered ${String(lines.length)} of ${String(inputs.length)}`);
  }
  return lines.map((line) => JSON.parse(line) as GoReading);
}
