/**
 * The entry point of the `oscar` single executable (hack/agent/build.ts): the whole command, as
 * cli/oscar.ts, but CommonJS once bundled (a single executable application runs a CommonJS
 * script), so no top-level await here.
 */
import { main } from './main.js';

main(process.argv).catch((error: unknown) => {
  process.stderr.write(`oscar: ${String(error)}\n`);
  process.exit(1);
});
