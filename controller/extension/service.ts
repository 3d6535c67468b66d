/**
 * The extension's hook handlers with their I/O: reconcile renderings read as nodes read them,
 * the node's OperatingSystemConfigNode, the target OSC's rollout policy and kept revisions, and the
 * grant written as one merge patch of the node's spec. Counts every call by hook and outcome (the
 * figure docs/cluster-api.md gives for a rollout).
 */
import type { Logger } from 'pino';
import { resolvePolicy, type ResolvedPolicy } from '../../api/rollout.js';
import type { OperatingSystemConfig, RevisionGrant } from '../../api/schema.js';
import {
  ANNOTATION_CHECKSUM,
  LABEL_OSC,
  LABEL_PURPOSE,
  LABEL_REVISION,
  PURPOSE_REVISION,
} from '../../api/secret.js';
import {
  ACCEPT_METADATA_LIST,
  CONTENT_MERGE_PATCH,
  isNotFound,
  type KubeHttp,
} from '../../kube/client.js';
import type { OscNodeObject } from '../osc/node-index.js';
import { HttpNodeDrainer, type NodeDrainer } from '../drain/drainer.js';
import { canUpdateMachine, canUpdateMachineSet } from './can-update.js';
import { inPlaceDisruption, nodeReady, withDrain } from './in-place-drain.js';
import {
  HOOKS_API_VERSION,
  type CanUpdateMachineRequest,
  type CanUpdateMachineSetRequest,
  type CommonResponse,
  type HookName,
  type UpdateMachineRequest,
  type UpdateMachineResponse,
} from './hooks.js';
import {
  KubeReconcileStates,
  type ReconcileState,
  type ReconcileStates,
} from './reconcile-state.js';
import {
  decideUpdate,
  requestTarget,
  response,
  RETRY_APPLYING_SECONDS,
  storedTarget,
  type GrantTarget,
  type StoredConfig,
  type StoredMachine,
} from './update-machine.js';

const FIELD_MANAGER = 'oscar-extension';
/** The one reply to an UpdateMachine request whose stored Machine and OscarConfig do not match. */
export const NOT_IN_PLACE_TARGET =
  'the request names no Machine being updated in place with this OscarConfig as its bootstrap config (the extension log says which check failed)';
const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';

/** A grant as a merge patch: every optional field the new grant lacks is removed, not kept. */
export function grantPatch(grant: RevisionGrant): Record<string, unknown> {
  const t = grant.try;
  return {
    spec: {
      revision: {
        ...grant,
        canary: grant.canary ?? null,
        try: t ? { ...t, healthChecks: t.healthChecks ?? null } : null,
      },
    },
  };
}

interface SecretMeta {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
}

export interface HookCounts {
  calls: Record<HookName, number>;
  /** UpdateMachine answers by kind: done, progress, failure (a grant counts as progress). */
  updateAnswers: Record<'done' | 'progress' | 'failure', number>;
  grants: number;
}

export class InPlaceExtension {
  readonly counts: HookCounts = {
    calls: { CanUpdateMachineSet: 0, CanUpdateMachine: 0, UpdateMachine: 0 },
    updateAnswers: { done: 0, progress: 0, failure: 0 },
    grants: 0,
  };
  private readonly states: ReconcileStates;

  constructor(
    private readonly http: KubeHttp,
    private readonly log: Logger,
    states?: ReconcileStates,
    private readonly now: () => Date = () => new Date(),
    private readonly drainer: NodeDrainer = new HttpNodeDrainer(http),
  ) {
    this.states = states ?? new KubeReconcileStates(http);
  }

  async handle(hook: HookName, body: unknown): Promise<CommonResponse> {
    this.counts.calls[hook]++;
    switch (hook) {
      case 'CanUpdateMachineSet': {
        const res = await canUpdateMachineSet(
          body as CanUpdateMachineSetRequest,
          this.states,
          (d) => {
            this.log.info({ hook, detail: d }, 'why not in place');
          },
        );
        this.log.info(
          { hook, covered: res.bootstrapConfigTemplatePatch !== undefined },
          res.message ?? '',
        );
        return res;
      }
      case 'CanUpdateMachine': {
        const res = await canUpdateMachine(body as CanUpdateMachineRequest, this.states, (d) => {
          this.log.info({ hook, detail: d }, 'why not in place');
        });
        this.log.info({ hook, covered: res.bootstrapConfigPatch !== undefined }, res.message ?? '');
        return res;
      }
      case 'UpdateMachine':
        return this.updateMachine(body as UpdateMachineRequest);
    }
  }

  private async updateMachine(req: UpdateMachineRequest): Promise<UpdateMachineResponse> {
    const t = requestTarget(req);
    if ('notOscar' in t) {
      // Not ours to update (Cluster API asked because oscar is the one UpdateMachine extension):
      // nothing of oscar's changes on that machine, so there is nothing to wait for.
      this.counts.updateAnswers.done++;
      return response({ kind: 'done', message: t.notOscar });
    }
    const { namespace } = t;
    const [machine, config] = await Promise.all([
      this.getOptional<StoredMachine>(
        `/apis/cluster.x-k8s.io/v1beta2/namespaces/${encodeURIComponent(namespace)}/machines/${encodeURIComponent(t.machine)}`,
      ),
      this.getOptional<StoredConfig>(
        `/apis/bootstrap.oscar.dev/v1alpha1/namespaces/${encodeURIComponent(namespace)}/oscarconfigs/${encodeURIComponent(t.config)}`,
      ),
    ]);
    const stored = storedTarget(namespace, t.machine, t.config, machine, config);
    if ('refused' in stored) {
      this.counts.updateAnswers.failure++;
      this.log.warn({ hook: 'UpdateMachine', machine: t.machine }, stored.refused);
      // The reply does not say which check failed: that would tell an unauthenticated caller
      // which Machines and OscarConfigs exist in a namespace.
      return response({ kind: 'failure', message: NOT_IN_PLACE_TARGET });
    }
    const { node, reconcile } = stored;
    const [target, oscNode] = await Promise.all([
      this.states.get(namespace, reconcile),
      this.getNode(node),
    ]);
    const decided = await decideUpdate({
      namespace,
      node,
      target,
      oscNode,
      revision: (t) => this.revisionOf(namespace, t),
      policy: () => this.policyOf(namespace, reconcile),
      now: this.now(),
    });
    // Drain- and Reboot-level changes: drained before the grant, Ready and uncordoned before done
    const d = await withDrain(decided, node, oscNode, {
      drainer: this.drainer,
      disruption: () =>
        'missing' in target
          ? Promise.resolve({ level: 'None', reasons: [] })
          : inPlaceDisruption(this.http, namespace, oscNode, target),
      nodeReady: () => nodeReady(this.http, node),
    });
    if (d.kind === 'grant') {
      await this.http.request('PATCH', `${NODES}/${encodeURIComponent(node)}`, {
        query: { fieldManager: FIELD_MANAGER },
        contentType: CONTENT_MERGE_PATCH,
        body: grantPatch(d.grant),
      });
      this.counts.grants++;
      this.counts.updateAnswers.progress++;
      this.log.info(
        { hook: 'UpdateMachine', node, osc: `${namespace}/${reconcile}`, revision: d.grant.number },
        d.message,
      );
      return response({
        kind: 'progress',
        message: d.message,
        retryAfterSeconds: RETRY_APPLYING_SECONDS,
      });
    }
    this.counts.updateAnswers[d.kind]++;
    const level = d.kind === 'failure' ? 'warn' : 'info';
    this.log[level]({ hook: 'UpdateMachine', node, answer: d.kind }, d.message);
    return response(d);
  }

  private getNode(name: string): Promise<OscNodeObject | undefined> {
    return this.getOptional<OscNodeObject>(`${NODES}/${encodeURIComponent(name)}`);
  }

  private async getOptional<T>(path: string): Promise<T | undefined> {
    try {
      return await this.http.request<T>('GET', path);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  private async policyOf(namespace: string, osc: string): Promise<ResolvedPolicy> {
    try {
      const o = await this.http.request<OperatingSystemConfig>(
        'GET',
        `/apis/oscar.dev/v1alpha1/namespaces/${encodeURIComponent(namespace)}/operatingsystemconfigs/${encodeURIComponent(osc)}`,
      );
      return resolvePolicy(o.spec.rollout);
    } catch (error) {
      if (isNotFound(error)) return resolvePolicy(undefined);
      throw error;
    }
  }

  /**
   * The revision to grant: the kept revision of that checksum (so the OSC's rollout counts the
   * node as granted its target), else the reconcile Secret under the number the rollout
   * controller gives its next revision.
   */
  private async revisionOf(namespace: string, target: ReconcileState): Promise<GrantTarget> {
    const osc = target.osc;
    const list = await this.http.request<{ items?: SecretMeta[] | null }>(
      'GET',
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`,
      {
        query: { labelSelector: `${LABEL_OSC}=${osc},${LABEL_PURPOSE}=${PURPOSE_REVISION}` },
        accept: ACCEPT_METADATA_LIST,
      },
    );
    let highest = 0;
    // a metadata list with nothing in it comes back with items: null
    for (const s of list.items ?? []) {
      const n = Number(s.metadata.labels?.[LABEL_REVISION] ?? '0');
      if (Number.isInteger(n) && n > highest) highest = n;
      if (s.metadata.annotations?.[ANNOTATION_CHECKSUM] === target.checksum && n > 0) {
        return { number: n, secretName: s.metadata.name };
      }
    }
    return { number: highest + 1, secretName: target.secretName };
  }
}

export function unsupported(message: string): CommonResponse {
  return { apiVersion: HOOKS_API_VERSION, kind: 'Response', status: 'Failure', message };
}
