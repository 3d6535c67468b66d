#!/usr/bin/env node
// The installed entry point: runs the compiled CLI (npm's `prepare` script builds dist/).
import '../dist/cli/oscar.js';
