/**
 * One parse per unit text per render. The guard parses every unit file and drop-in to check its
 * syntax, and planning parses them again to see what [Install] says; inside a render scope the
 * second parse is a lookup. The scope lives only while a render runs synchronously (keyed by the
 * text itself, so it cannot go stale), so each render still parses everything it is given once.
 */
import { parseUnitFile, type ParsedUnitFile } from '../api/systemd/unit-file.js';

let scope: Map<string, ParsedUnitFile> | undefined;

/** parseUnitFile, remembered for the rest of the current render scope (if any). */
export function parseUnit(text: string): ParsedUnitFile {
  if (scope === undefined) return parseUnitFile(text);
  let parsed = scope.get(text);
  if (parsed === undefined) {
    parsed = parseUnitFile(text);
    scope.set(text, parsed);
  }
  return parsed;
}

/**
 * Runs `fn` in a render scope: the outer one if a scope is already open, else a new one that
 * ends when `fn` returns. Only synchronous work sees it (a returned promise's later steps don't).
 */
export function inRenderScope<T>(fn: () => T): T {
  if (scope !== undefined) return fn();
  scope = new Map();
  try {
    return fn();
  } finally {
    scope = undefined;
  }
}
