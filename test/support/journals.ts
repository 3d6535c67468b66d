/**
 * What a node's services said last, for a failure message (a wait's `onTimeout`): the tail of
 * each unit's journal, headed by the node and the unit.
 */
import type { Node } from './nspawn.js';

/** A unit and how many of its last journal lines to show. */
export type JournalTail = readonly [unit: string, lines: number];

/** The units a kubelet machine's boot runs through, most telling first. */
export const KUBELET_JOURNALS: readonly JournalTail[] = [
  ['kubelet.service', 40],
  ['containerd.service', 15],
  ['oscar-agent.service', 25],
  ['cloud-final.service', 10],
];

/** The last lines of each unit's journal on `node`, one section a unit. */
export async function journalTails(
  node: Pick<Node, 'name' | 'journal'>,
  units: readonly JournalTail[] = KUBELET_JOURNALS,
): Promise<string> {
  const parts: string[] = [];
  for (const [unit, lines] of units) {
    const tail = (await node.journal(unit)).split('\n').slice(-lines).join('\n');
    parts.push(`--- ${node.name} ${unit}\n${tail}`);
  }
  return parts.join('\n');
}
