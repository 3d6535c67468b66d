import type { Command } from 'commander';
import { API_VERSION } from '../../api/schema.js';
import { VERSION } from '../version.js';

export function register(program: Command): void {
  program
    .command('version')
    .description('print the oscar version and the API version it serves')
    .action(() => {
      console.log(`oscar ${VERSION} (api ${API_VERSION}, node ${process.version})`);
    });
}
