import { API_VERSION } from '../../api/schema.js';
import { printStructured, type OutputFormat } from '../support/output.js';
import { VERSION } from '../support/version.js';

/** What `oscar version -o json` prints: what a bug report or an upgrade script needs. */
export function versionInfo(): Record<string, string> {
  return {
    version: VERSION,
    apiVersion: API_VERSION,
    node: process.version,
    platform: `${process.platform}/${process.arch}`,
  };
}

/** `oscar version` (described in ./node-commands.ts). */
export function versionCommand(opts: { output?: OutputFormat } = {}): void {
  if (opts.output) {
    process.stdout.write(printStructured(versionInfo(), opts.output));
    return;
  }
  console.log(`oscar ${VERSION} (api ${API_VERSION}, node ${process.version})`);
}
