/**
 * Which pods a drain evicts and which PodDisruptionBudget stands in the way: pure rules over the
 * objects as the API server returns them.
 * - DaemonSet pods stay (the DaemonSet controller would put them straight back, and they are
 *   meant to run on every node, cordoned or not), as `kubectl drain --ignore-daemonsets`;
 * - mirror pods stay (the kubelet runs them from its static manifests; the API object is only a
 *   mirror, and deleting it stops nothing);
 * - pods that finished (Succeeded, Failed) stay: they hold no workload a budget protects;
 * - a pod already being deleted is waited for, not evicted again.
 */

/** What a drain reads of a pod. */
export interface PodLike {
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { kind?: string; controller?: boolean }[];
    deletionTimestamp?: string;
  };
  status?: { phase?: string };
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

export interface PdbLike {
  metadata: { name: string; namespace?: string };
  spec?: { selector?: LabelSelector };
}

/** The kubelet marks the API object of a static pod with this annotation. */
export const MIRROR_ANNOTATION = 'kubernetes.io/config.mirror';

/** Why the drain leaves `pod` alone, or undefined when it must go. */
export function whyKept(pod: PodLike): string | undefined {
  if (pod.metadata.annotations?.[MIRROR_ANNOTATION] !== undefined) return 'mirror pod';
  const owner = pod.metadata.ownerReferences?.find((o) => o.controller === true);
  if (owner?.kind === 'DaemonSet') return 'DaemonSet pod';
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return `finished (${phase})`;
  return undefined;
}

/** Pods the drain must see gone; those not yet being deleted are the ones to evict. */
export function podsToDrain(pods: readonly PodLike[]): {
  evict: PodLike[];
  terminating: PodLike[];
} {
  const evict: PodLike[] = [];
  const terminating: PodLike[] = [];
  for (const pod of pods) {
    if (whyKept(pod) !== undefined) continue;
    (pod.metadata.deletionTimestamp !== undefined ? terminating : evict).push(pod);
  }
  return { evict, terminating };
}

function expressionMatches(
  labels: Record<string, string>,
  e: { key: string; operator: string; values?: string[] },
): boolean {
  const has = Object.prototype.hasOwnProperty.call(labels, e.key);
  const value = labels[e.key];
  switch (e.operator) {
    case 'In':
      return has && (e.values ?? []).includes(value ?? '');
    case 'NotIn':
      return !has || !(e.values ?? []).includes(value ?? '');
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
    default:
      return false; // an operator the API server would have refused: match nothing
  }
}

/** Kubernetes' label selector semantics; a PDB's empty selector matches every pod (policy/v1). */
export function selectorMatches(
  selector: LabelSelector | undefined,
  labels: Record<string, string> = {},
): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[k] !== v) return false;
  }
  return (selector.matchExpressions ?? []).every((e) => expressionMatches(labels, e));
}

/** "namespace/name" of the first PodDisruptionBudget (by name) that covers `pod`. */
export function budgetOf(pod: PodLike, pdbs: readonly PdbLike[]): string | undefined {
  const found = [...pdbs]
    .filter((b) => (b.metadata.namespace ?? '') === (pod.metadata.namespace ?? ''))
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))
    .find((b) => selectorMatches(b.spec?.selector, pod.metadata.labels));
  return found && `${found.metadata.namespace ?? ''}/${found.metadata.name}`;
}

export const podKey = (pod: PodLike): string =>
  `${pod.metadata.namespace ?? ''}/${pod.metadata.name}`;
