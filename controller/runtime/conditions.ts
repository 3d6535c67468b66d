/**
 * metav1.Condition bookkeeping: a condition's lastTransitionTime moves only when its status
 * changes, so an unchanged state produces an identical status and therefore no write.
 */
import type { Condition } from '../../api/schema.js';

export type ConditionType =
  | 'Valid'
  | 'Rendered'
  | 'Ready'
  // OscarConfig (controller/bootstrap)
  | 'DataSecretAvailable'
  | 'BootstrapTokenAvailable'
  | 'NodeIdentity'
  | 'KubeletIdentity'
  | 'Paused';

export interface ConditionInput {
  type: ConditionType;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/** The API server limits a condition message to 32 KiB; long error lists are cut with a note. */
export const MAX_MESSAGE = 32_768;

export function truncateMessage(message: string): string {
  if (message.length <= MAX_MESSAGE) return message;
  const note = ' … (truncated; see the controller Events for the full list)';
  return message.slice(0, MAX_MESSAGE - note.length) + note;
}

/** Conditions after setting `inputs` (observed at `generation`, at time `now`), sorted by type. */
export function setConditions(
  existing: readonly Condition[] | undefined,
  inputs: readonly ConditionInput[],
  generation: number | undefined,
  now: Date,
): Condition[] {
  const byType = new Map((existing ?? []).map((c) => [c.type, c]));
  for (const input of inputs) {
    const before = byType.get(input.type);
    const condition: Condition = {
      type: input.type,
      status: input.status,
      reason: input.reason,
      message: truncateMessage(input.message),
      lastTransitionTime:
        before && before.status === input.status
          ? before.lastTransitionTime
          : now.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    };
    if (generation !== undefined) condition.observedGeneration = generation;
    byType.set(input.type, condition);
  }
  return [...byType.values()].sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: ConditionType,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}
