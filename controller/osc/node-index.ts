/**
 * Which nodes follow which OperatingSystemConfig, from the agents' OperatingSystemConfigNode
 * reports (status.oscRef), and how far each got: the input of an OSC's status.nodes counts.
 * The controller keeps one small summary per node — never the reports themselves, which carry
 * journal lines and can be many — and re-reconciles an OSC only when a summary that counts for
 * it changed (a report's timestamps moving changes nothing here).
 */
import { CONFIG_UID_LABEL } from '../../api/identity.js';
import type {
  OperatingSystemConfigNodeSpec,
  OperatingSystemConfigNodeStatus,
  OperatingSystemConfigStatus,
} from '../../api/schema.js';
import type { KubeObject } from '../kube/types.js';

export interface OscNodeObject extends KubeObject {
  spec?: OperatingSystemConfigNodeSpec;
  status?: OperatingSystemConfigNodeStatus;
}

/** What counts of one node: the config it follows ("namespace/name"), what it applied, health. */
export interface NodeSummary {
  osc: string;
  applied?: string;
  degraded: boolean;
  /** Its agent reports Drifted=True: something it applied was changed on the node. */
  drifted?: boolean;
}

function conditionTrue(node: OscNodeObject, type: string): boolean {
  return node.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
}

export type NodeCounts = NonNullable<OperatingSystemConfigStatus['nodes']>;

/** The node's summary, or undefined while its agent has not named the config it follows. */
export function summarize(node: OscNodeObject): NodeSummary | undefined {
  const ref = node.status?.oscRef;
  if (!ref?.name || !ref.namespace) return undefined;
  const summary: NodeSummary = {
    osc: `${ref.namespace}/${ref.name}`,
    degraded: conditionTrue(node, 'Degraded'),
  };
  const applied = node.status?.appliedChecksum;
  if (applied) summary.applied = applied;
  if (conditionTrue(node, 'Drifted')) summary.drifted = true;
  return summary;
}

/**
 * Drops what counting and rollouts never read, before the informer caches the object: a
 * report's lastError journal lines and restarted units would otherwise sit in memory for every
 * node. Kept: what the counts read, and for rollouts the grant (spec), the node's answer to it
 * (status.revision, without its message) and how the agent follows (status.source).
 */
/**
 * Whether a node object is this config's machine's: an object the identity approver labelled for
 * another config UID belongs to an earlier machine of the same name (docs/identity.md); an
 * unlabelled one (an agent with other credentials, or a certificate from before UIDs) may be.
 */
export function nodeOfConfig(
  node: { metadata: { labels?: Record<string, string> } },
  configUid: string | undefined,
): boolean {
  const owner = node.metadata.labels?.[CONFIG_UID_LABEL];
  return owner === undefined || configUid === undefined || owner === configUid;
}

export function slimNode(obj: unknown): void {
  const node = obj as OscNodeObject | null;
  if (!node?.metadata) return;
  const { name, namespace, uid, resourceVersion, generation, labels } = node.metadata;
  node.metadata = { name };
  // whose node it is (the identity approver's label): bootstrap's join check reads it
  const configUid = labels?.[CONFIG_UID_LABEL];
  if (configUid !== undefined) node.metadata.labels = { [CONFIG_UID_LABEL]: configUid };
  if (namespace !== undefined) node.metadata.namespace = namespace;
  if (uid !== undefined) node.metadata.uid = uid;
  if (resourceVersion !== undefined) node.metadata.resourceVersion = resourceVersion;
  if (generation !== undefined) node.metadata.generation = generation;
  const s = node.status;
  if (!s) return;
  const slim: OperatingSystemConfigNodeStatus = {};
  if (s.oscRef) slim.oscRef = s.oscRef;
  if (s.appliedChecksum) slim.appliedChecksum = s.appliedChecksum;
  if (s.source) slim.source = s.source;
  if (s.revision) slim.revision = { ...s.revision, message: s.revision.message.slice(0, 300) };
  const counted = s.conditions?.filter((c) => c.type === 'Degraded' || c.type === 'Drifted');
  if (counted?.length) slim.conditions = counted;
  node.status = slim;
}

/** total: nodes following the config; updated: those that applied `checksum`; degraded; drifted. */
export function countNodes(nodes: Iterable<NodeSummary>, checksum: string | undefined): NodeCounts {
  const counts: NodeCounts = { total: 0, updated: 0, degraded: 0, drifted: 0 };
  for (const n of nodes) {
    counts.total++;
    if (checksum !== undefined && n.applied === checksum) counts.updated++;
    if (n.degraded) counts.degraded++;
    if (n.drifted === true) counts.drifted++;
  }
  return counts;
}

function same(a: NodeSummary | undefined, b: NodeSummary | undefined): boolean {
  return (
    a?.osc === b?.osc &&
    a?.applied === b?.applied &&
    a?.degraded === b?.degraded &&
    (a?.drifted ?? false) === (b?.drifted ?? false)
  );
}

export class NodeIndex {
  private readonly byNode = new Map<string, NodeSummary>();
  private readonly byOsc = new Map<string, Map<string, NodeSummary>>();

  /** Records a node's summary; returns the configs whose counts may have changed. */
  set(node: string, summary: NodeSummary | undefined): string[] {
    const before = this.byNode.get(node);
    if (same(before, summary)) return [];
    if (before) {
      const users = this.byOsc.get(before.osc);
      users?.delete(node);
      if (users?.size === 0) this.byOsc.delete(before.osc);
      this.byNode.delete(node);
    }
    if (summary) {
      this.byNode.set(node, summary);
      let users = this.byOsc.get(summary.osc);
      if (!users) this.byOsc.set(summary.osc, (users = new Map<string, NodeSummary>()));
      users.set(node, summary);
    }
    const touched = new Set<string>();
    if (before) touched.add(before.osc);
    if (summary) touched.add(summary.osc);
    return [...touched];
  }

  remove(node: string): string[] {
    return this.set(node, undefined);
  }

  /** The summaries of the nodes that follow the config "namespace/name". */
  of(oscKey: string): NodeSummary[] {
    return [...(this.byOsc.get(oscKey)?.values() ?? [])];
  }
}
