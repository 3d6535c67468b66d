// The `oscar` command's entry point. From source: node --import tsx cli/oscar.ts …
import { main } from './main.js';

await main(process.argv);
