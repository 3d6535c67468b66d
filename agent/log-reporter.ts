/**
 * A reporter that logs every outcome (always on; the kube reporter adds to it). Its messages are
 * fixed words and its facts fields (docs/operations.md), so `msg=applied` finds every apply.
 */
import { errorFields, shortChecksum, type Logger } from '../log/logger.js';
import { ApplyError, type ApplyResult } from './apply.js';
import type { Reporter } from './loop.js';

export function logReporter(log: Logger): Reporter {
  return {
    restored: (checksum) => {
      log.info({ checksum: shortChecksum(checksum) }, 'restored from the state directory');
    },
    desired: (checksum) => {
      log.info({ checksum: shortChecksum(checksum) }, 'desired');
    },
    applied: (result, ms) => {
      log.info(applyFields(result, ms), 'applied');
    },
    failed: (checksum, error) => {
      const fields = { checksum: shortChecksum(checksum), ...failureFields(error) };
      log.error(fields, 'apply failed; the last good state stays');
    },
    sourceFailed: () => undefined, // the agent already logs source errors (and the monitor drift)
    reverted: (result, ms) => {
      log.info(applyFields(result, ms), 'drift reverted');
    },
    revertFailed: (error) => {
      log.error(failureFields(error), 'drift revert failed');
    },
  };
}

/** A failed apply's (or revert's) log fields: the error, and the unit and journal of an ApplyError. */
function failureFields(error: Error): Record<string, unknown> {
  return {
    ...errorFields(error),
    ...(error instanceof ApplyError && error.unit !== undefined ? { unit: error.unit } : {}),
    ...(error instanceof ApplyError && error.journal.length > 0 ? { journal: error.journal } : {}),
  };
}

/** An apply's (or a revert's) log fields: what it did, how long it took, which units it touched. */
function applyFields(result: ApplyResult, ms: number): Record<string, unknown> {
  return {
    checksum: shortChecksum(result.checksum),
    durationMs: Math.round(ms),
    actions: result.actions.length,
    resumed: result.resumed,
    units: result.touchedUnits.map((u) => `${u.action} ${u.name}`),
  };
}
