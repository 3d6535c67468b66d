import type { Command } from 'commander';
import { renderAllCrdsYaml } from '../../api/crd.js';

export function register(program: Command): void {
  program
    .command('crd')
    .description("print oscar's CustomResourceDefinitions (kubectl apply -f -)")
    .action(() => {
      process.stdout.write(renderAllCrdsYaml());
    });
}
