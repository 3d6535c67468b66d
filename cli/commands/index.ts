import type { Command } from 'commander';
import * as agent from './agent.js';
import * as controller from './controller.js';
import * as crd from './crd.js';
import * as plan from './plan.js';
import * as render from './render.js';
import * as renderer from './renderer.js';
import * as up from './up.js';
import * as validate from './validate.js';
import * as version from './version.js';

/** Every subcommand registers itself; add new ones here. */
export const commands: { register(program: Command): void }[] = [
  validate,
  render,
  renderer,
  crd,
  controller,
  agent,
  plan,
  up,
  version,
];
