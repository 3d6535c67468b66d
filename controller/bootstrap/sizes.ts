/**
 * What the bootstrap additions cost a machine's user data, per format: the provision example with
 * and without them, and the additions alone (an empty provision OSC with and without them). The
 * budget is 16 KiB for the example with the additions (AWS's user-data limit) and 4 KiB for the
 * additions alone; `node --import tsx hack/bench/bootstrap-size.ts` prints the figures and the
 * unit tests hold them to the budget.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { Format, OperatingSystemConfigSpec } from '../../api/schema.js';
import type { RendererRegistry } from '../../renderers/registry.js';
import type { BootstrapInputs } from './additions.js';
import { renderMachine } from './render.js';

/** A certificate-sized PEM: a 2048-bit RSA CA certificate (kubeadm's) is ~1.1 KB of PEM. */
function caPemOfRealisticSize(): string {
  const body = Buffer.alloc(820, 0x5a).toString('base64');
  const lines = body.match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
}

/** Inputs shaped like a real machine's: a long-ish machine name, an https agent URL. */
export function sampleBootstrapInputs(): BootstrapInputs {
  return {
    machine: { name: 'workers-md-0-7d9f8b5c4x-abcde', namespace: 'cluster-prod-eu1' },
    configUid: '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b',
    apiServer: { url: 'https://api.prod-eu1.example.com:6443', caPem: caPemOfRealisticSize() },
    token: { id: 'abcdef', secret: '0123456789abcdef' },
    reconcileOsc: 'workers-reconcile',
    agent: {
      url: 'https://downloads.example.com/oscar/v0.1.0/oscar-agent-linux-amd64',
      sha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    },
  };
}

export interface UserDataSize {
  format: Format;
  type: string;
  /** examples/ubuntu-provision.yaml (as this type) alone. */
  example: number;
  withAdditions: number;
  /** An empty provision OSC with the additions, minus the same without them. */
  additions: number;
}

const FORMATS: [string, Format][] = [
  ['ubuntu', 'cloud-config'],
  ['flatcar', 'ignition'],
  ['generic', 'script'],
];

export async function userDataSizes(registry: RendererRegistry): Promise<UserDataSize[]> {
  const path = fileURLToPath(new URL('../../examples/ubuntu-provision.yaml', import.meta.url));
  const example = (parse(await readFile(path, 'utf8')) as { spec: OperatingSystemConfigSpec }).spec;
  const inputs = sampleBootstrapInputs();
  const size = async (
    spec: OperatingSystemConfigSpec,
    format: Format,
    bootstrap: boolean,
  ): Promise<number> => {
    const r = await renderMachine(registry, {
      provision: { name: 'worker-provision', namespace: inputs.machine.namespace, spec },
      refs: { secrets: new Map(), configMaps: new Map() },
      placeholders: { machine: inputs.machine },
      ...(bootstrap ? { bootstrap: inputs } : {}),
      format,
    });
    if (!r.ok) throw new Error(`${format}: ${JSON.stringify(r.errors)}`);
    return r.userData.length;
  };
  const out: UserDataSize[] = [];
  for (const [type, format] of FORMATS) {
    const spec: OperatingSystemConfigSpec = { ...example, type };
    if (type === 'flatcar') delete spec.packages;
    const empty: OperatingSystemConfigSpec = { type, purpose: 'provision' };
    out.push({
      format,
      type,
      example: await size(spec, format, false),
      withAdditions: await size(spec, format, true),
      additions: (await size(empty, format, true)) - (await size(empty, format, false)),
    });
  }
  return out;
}
