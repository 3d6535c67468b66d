#!/usr/bin/env node
// The installed entry point: runs the compiled CLI (npm's `prepare` builds dist/).
import { main } from '../dist/cli/main.js';

await main(process.argv);
