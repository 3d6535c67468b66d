// The OSC's one status writer against the real API server: the upgrade from two field managers
// (the OSC controller's oscar-controller, the rollout controller's oscar-rollout for
// status.rollout) to one. Server-side apply removes a field an apply leaves out only when no other
// manager owns it, so without the release the old manager's drain entry and pause reason would
// stay in the status forever; the control step below shows exactly that.
import { describe, expect, it } from 'vitest';
import {
  API_VERSION,
  OSC_KIND,
  type OperatingSystemConfigStatus,
  type RolloutStatus,
} from '../../api/schema.js';
import { CONTENT_APPLY_PATCH } from '../../kube/client.js';
import type { OscObject } from '../../controller/kube/types.js';
import { LEGACY_ROLLOUT_MANAGER, OscStatusWriter } from '../../controller/osc/status-writer.js';
import { FIELD_MANAGER, HttpWriter, oscPath } from '../../controller/osc/writer.js';
import { Api } from './controller-support.js';
import { createTestNamespace, skipWithoutCluster } from './support/cluster.js';

skipWithoutCluster();

const NAME = 'w';

function rollout(over: Partial<RolloutStatus>): RolloutStatus {
  return {
    revision: 2,
    checksum: 'c'.repeat(64),
    stableRevision: 1,
    phase: 'Progressing',
    message: 'Rolling out revision 2 from 1.',
    maxUnavailable: 1,
    failureThreshold: 0,
    nodes: { total: 2, updated: 1, updating: 1, failed: 0, rolledBack: 0, pending: 0 },
    wave: 2,
    waves: 2,
    disruption: 'Drain',
    ...over,
  };
}

/** A status write the way the controllers before the one writer made it, as `manager`. */
async function applyStatusAs(
  api: Api,
  ns: string,
  manager: string,
  status: OperatingSystemConfigStatus,
): Promise<void> {
  await api.http.request('PATCH', `${oscPath(ns, NAME)}/status`, {
    query: { fieldManager: manager, force: true },
    contentType: CONTENT_APPLY_PATCH,
    body: {
      apiVersion: API_VERSION,
      kind: OSC_KIND,
      metadata: { name: NAME, namespace: ns },
      status,
    },
  });
}

function statusManagers(osc: OscObject | undefined): string[] {
  const managed = (osc?.metadata as { managedFields?: { manager: string; subresource?: string }[] })
    .managedFields;
  return (managed ?? [])
    .filter((m) => m.subresource === 'status')
    .map((m) => m.manager)
    .sort();
}

describe('the OSC status writer, upgrading from two field managers', () => {
  it('an OSC whose status the old two managers wrote: the one writer removes a finished drain and a pause reason', async () => {
    const ns = await createTestNamespace('status-writer');
    const api = new Api();
    await api.applyOsc(ns, NAME, {
      type: 'debian',
      purpose: 'reconcile',
      files: [{ path: '/etc/app.conf', content: { inline: { data: 'v2\n' } } }],
    });
    // What the controllers before the one writer left: the OSC controller's part, and
    // status.rollout under the rollout controller's own manager, a node draining, paused.
    const base: OperatingSystemConfigStatus = {
      observedGeneration: 1,
      nodes: { total: 2, updated: 1, degraded: 0, drifted: 0 },
    };
    await applyStatusAs(api, ns, FIELD_MANAGER, base);
    const drain = {
      node: 'n1',
      revision: 2,
      phase: 'Draining' as const,
      startTime: '2026-12-04T10:00:00Z',
      message: 'evicting 1 pod',
    };
    await applyStatusAs(api, ns, LEGACY_ROLLOUT_MANAGER, {
      rollout: rollout({ phase: 'Paused', pauseReason: 'Manual', drains: [drain] }),
    });
    expect(statusManagers(await api.getOsc(ns, NAME))).toEqual([
      FIELD_MANAGER,
      LEGACY_ROLLOUT_MANAGER,
    ]);

    // Control: an apply by the one manager that leaves them out does not remove them while the
    // old manager still owns them — the hazard the release is for.
    const http = new HttpWriter(api.http, 'status-writer-test');
    const done = rollout({ phase: 'Progressing', nodes: { ...rollout({}).nodes, updated: 2 } });
    await http.patchStatus(ns, NAME, { ...base, rollout: done });
    const kept = await api.getOsc(ns, NAME);
    expect(kept?.status?.rollout?.drains).toEqual([drain]);
    expect(kept?.status?.rollout?.pauseReason).toBe('Manual');

    // The one writer: its write's answer shows the old manager, which it releases once.
    const writer = new OscStatusWriter({
      api: http,
      cached: () => ({
        ...(kept?.status ? { status: kept.status } : {}),
        ...(kept?.metadata.resourceVersion
          ? { resourceVersion: kept.metadata.resourceVersion }
          : {}),
      }),
    });
    const next = rollout({ ...done, phase: 'Complete', completionTime: '2026-12-04T10:05:00Z' });
    await writer.write(`${ns}/${NAME}`, 'rollout', next);
    const after = await api.getOsc(ns, NAME);
    expect(after?.status?.rollout).toEqual(next);
    expect(after?.status?.rollout?.drains).toBeUndefined();
    expect(after?.status?.rollout?.pauseReason).toBeUndefined();
    expect(after?.status?.nodes).toEqual(base.nodes); // the OSC controller's part kept
    expect(after?.status?.observedGeneration).toBe(1);
    expect(statusManagers(after)).toEqual([FIELD_MANAGER]);

    // From now on, a field the one writer leaves out goes with that write.
    await writer.write(`${ns}/${NAME}`, 'osc', { observedGeneration: 1 });
    expect((await api.getOsc(ns, NAME))?.status?.nodes).toBeUndefined();
  });
});
