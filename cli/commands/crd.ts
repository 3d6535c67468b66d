import { renderAllCrdsYaml } from '../../api/crd/crd.js';

/** `oscar crd` (described in ./index.ts). */
export function crdCommand(): void {
  process.stdout.write(renderAllCrdsYaml());
}
