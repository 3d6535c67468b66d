import { API_VERSION } from '../../api/schema.js';
import { VERSION } from '../version.js';

/** `oscar version` (described in ./index.ts). */
export function versionCommand(): void {
  console.log(`oscar ${VERSION} (api ${API_VERSION}, node ${process.version})`);
}
