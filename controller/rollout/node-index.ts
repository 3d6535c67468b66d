/**
 * The nodes each rollout moves: OperatingSystemConfigNodes whose agent follows grants
 * (status.source Grant) for an OSC (status.oscRef), as planner NodeStates. Kept per OSC so a
 * rollout pass reads its own nodes, not every node; an update returns the OSCs whose rollout it
 * may move (the node's OSC before and after), and only when something the planner reads changed.
 */
import type { OscNodeObject } from '../osc/node-index.js';
import type { NodeState } from './planner.js';

/**
 * The OSC ("namespace/name") a grant-following node belongs to, and its planner state. A grant
 * decides it before the node's report does: Cluster API's in-place update (controller/extension/)
 * grants a node a rendering of another OSC, and from that write on the node is that OSC's (its old
 * OSC's rollout must not grant it back while the agent has not reported the move yet).
 */
export function nodeStateOf(node: OscNodeObject): { osc: string; state: NodeState } | undefined {
  const s = node.status;
  const granted = node.spec?.revision;
  const ref = granted ? { namespace: granted.namespace, name: granted.osc } : s?.oscRef;
  if (s?.source !== 'Grant' || !ref?.name || !ref.namespace) return undefined;
  const state: NodeState = {
    name: node.metadata.name,
    generation: node.metadata.generation ?? 0,
    degraded: s.conditions?.some((c) => c.type === 'Degraded' && c.status === 'True') ?? false,
  };
  if (node.spec?.revision) state.grant = node.spec.revision;
  if (s.revision) state.report = s.revision;
  if (s.appliedChecksum) state.appliedChecksum = s.appliedChecksum;
  return { osc: `${ref.namespace}/${ref.name}`, state };
}

/**
 * Tenancy (docs/identity.md): a node counts in an OSC's rollout only if oscar issued its identity
 * for a config of that OSC's namespace — or issued it none at all (an agent run with other
 * credentials, which an administrator placed). What the node reports about itself never puts an
 * oscar-issued node into another namespace's rollout, where it could stall it.
 */
/** No namespace at all: what a node whose identity no live config holds belongs to. */
export const NO_NAMESPACE = '';

/**
 * The namespaces a node belongs to, from what the identity approver issued: the live configs
 * naming its machine whose identity was issued, and the config UID the approver labelled its
 * object with. A labelled object is that one identity's alone: if no live config here holds that
 * UID (a deleted machine's certificate, still valid, made its object again; or a config another
 * controller watches), it belongs nowhere — never to every rollout, as an unlabelled one may.
 */
export function identityNamespaces(
  issued: readonly { namespace: string; uid: string }[],
  nodeConfigUid: string | undefined,
): string[] {
  if (nodeConfigUid === undefined) return issued.map((c) => c.namespace);
  const holder = issued.find((c) => c.uid === nodeConfigUid);
  return [holder ? holder.namespace : NO_NAMESPACE];
}

export function memberOf(oscKey: string, issuedNamespaces: readonly string[]): boolean {
  if (issuedNamespaces.length === 0) return true;
  const namespace = oscKey.slice(0, oscKey.indexOf('/'));
  return issuedNamespaces.every((n) => n === namespace);
}

function sameState(a: NodeState, b: NodeState): boolean {
  return (
    a.generation === b.generation &&
    a.degraded === b.degraded &&
    a.appliedChecksum === b.appliedChecksum &&
    a.grant?.checksum === b.grant?.checksum &&
    a.grant?.grantedTime === b.grant?.grantedTime &&
    a.report?.observedGeneration === b.report?.observedGeneration &&
    a.report?.phase === b.report?.phase &&
    a.report?.checksum === b.report?.checksum
  );
}

export class GrantNodeIndex {
  private readonly byNode = new Map<string, { osc: string; state: NodeState }>();
  private readonly byOsc = new Map<string, Map<string, NodeState>>();

  /** Records a node; returns the OSCs whose rollout may have moved. */
  set(node: OscNodeObject): string[] {
    const name = node.metadata.name;
    const next = nodeStateOf(node);
    const before = this.byNode.get(name);
    if (before && next && before.osc === next.osc && sameState(before.state, next.state)) {
      this.byNode.set(name, next);
      this.byOsc.get(next.osc)?.set(name, next.state);
      return [];
    }
    if (before) {
      const users = this.byOsc.get(before.osc);
      users?.delete(name);
      if (users?.size === 0) this.byOsc.delete(before.osc);
      this.byNode.delete(name);
    }
    if (next) {
      this.byNode.set(name, next);
      let users = this.byOsc.get(next.osc);
      if (!users) this.byOsc.set(next.osc, (users = new Map<string, NodeState>()));
      users.set(name, next.state);
    }
    return [...new Set([before?.osc, next?.osc].filter((k): k is string => k !== undefined))];
  }

  remove(name: string): string[] {
    const before = this.byNode.get(name);
    if (!before) return [];
    this.byNode.delete(name);
    const users = this.byOsc.get(before.osc);
    users?.delete(name);
    if (users?.size === 0) this.byOsc.delete(before.osc);
    return [before.osc];
  }

  of(oscKey: string): NodeState[] {
    return [...(this.byOsc.get(oscKey)?.values() ?? [])];
  }
}
