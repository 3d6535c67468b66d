import { describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../api/rollout.js';
import type { ResolvedConfig } from '../../api/resolved.js';
import type { OscNodeObject } from '../osc/node-index.js';
import {
  decideUpdate,
  requestTarget,
  response,
  storedTarget,
  RETRY_APPLYING_SECONDS,
  type UpdateInputs,
} from './update-machine.js';

const SUM = 'a'.repeat(64);
const OLD = 'b'.repeat(64);
const NOW = new Date('2026-12-03T14:00:00.000Z');
const target = {
  osc: 'v2',
  secretName: 'oscar-v2-reconcile',
  checksum: SUM,
  config: { type: 'ubuntu' } as ResolvedConfig,
};

function node(over: Partial<OscNodeObject> = {}, generation = 3): OscNodeObject {
  return {
    apiVersion: 'oscar.dev/v1alpha1',
    kind: 'OperatingSystemConfigNode',
    metadata: { name: 'm-1', generation },
    status: {
      source: 'Grant',
      oscRef: { namespace: 'pools', name: 'v1' },
      appliedChecksum: OLD,
    },
    ...over,
  };
}

const grantV2 = {
  namespace: 'pools',
  osc: 'v2',
  number: 4,
  secretName: 'oscar-v2-rev-1',
  checksum: SUM,
  grantedTime: NOW.toISOString(),
};

function inputs(over: Partial<UpdateInputs> = {}): UpdateInputs {
  return {
    namespace: 'pools',
    node: 'm-1',
    target,
    oscNode: node(),
    revision: () => Promise.resolve({ number: 4, secretName: 'oscar-v2-rev-1' }),
    policy: () => Promise.resolve(resolvePolicy({ soakSeconds: 5, progressDeadlineSeconds: 60 })),
    now: NOW,
    ...over,
  };
}

describe('UpdateMachine: decideUpdate', () => {
  it("grants the node the target OSC's revision in try mode with the OSC's policy", async () => {
    const d = await decideUpdate(inputs());
    expect(d).toEqual({
      kind: 'grant',
      grant: { ...grantV2, try: { soakSeconds: 5, deadlineSeconds: 60 } },
      message: expect.stringMatching(/granted node m-1 v2/) as unknown,
    });
  });

  it('a grant for the target is never rewritten: in progress until the node answers it', async () => {
    const granted = node({ spec: { revision: grantV2 } }, 4);
    const d = await decideUpdate(inputs({ oscNode: granted }));
    expect(d).toMatchObject({ kind: 'progress', retryAfterSeconds: RETRY_APPLYING_SECONDS });
    // an answer to the previous generation (the old grant) is not an answer to this one
    const stale = node(
      {
        spec: { revision: grantV2 },
        status: {
          source: 'Grant',
          appliedChecksum: SUM,
          revision: {
            observedGeneration: 3,
            number: 4,
            checksum: SUM,
            phase: 'Confirmed',
            reason: 'Healthy',
            message: '',
            lastTransitionTime: NOW.toISOString(),
          },
        },
      },
      4,
    );
    expect((await decideUpdate(inputs({ oscNode: stale }))).kind).toBe('progress');
  });

  it('done once the node confirmed the target and applied it', async () => {
    const done = node(
      {
        spec: { revision: grantV2 },
        status: {
          source: 'Grant',
          appliedChecksum: SUM,
          revision: {
            observedGeneration: 4,
            number: 4,
            checksum: SUM,
            phase: 'Confirmed',
            reason: 'Healthy',
            message: '',
            lastTransitionTime: NOW.toISOString(),
          },
        },
      },
      4,
    );
    const d = await decideUpdate(inputs({ oscNode: done }));
    expect(d.kind).toBe('done');
    // idempotent: the same object, the same answer, nothing written
    expect((await decideUpdate(inputs({ oscNode: done }))).kind).toBe('done');
  });

  it.each([
    [
      'RolledBack',
      /rolled back v2 .*HealthCheckFailed: kubelet unhealthy; last error \(kubelet.service\): boom/,
    ],
    ['Failed', /failed to apply v2 .*HealthCheckFailed: kubelet unhealthy/],
  ] as const)("%s: Failure with the node's reason and error", async (phase, why) => {
    const failed = node(
      {
        spec: { revision: grantV2 },
        status: {
          source: 'Grant',
          appliedChecksum: OLD,
          lastError: { message: 'boom', unit: 'kubelet.service', time: NOW.toISOString() },
          revision: {
            observedGeneration: 4,
            number: 4,
            checksum: SUM,
            phase,
            reason: 'HealthCheckFailed',
            message: 'kubelet unhealthy',
            lastTransitionTime: NOW.toISOString(),
          },
        },
      },
      4,
    );
    const d = await decideUpdate(inputs({ oscNode: failed }));
    expect(d.kind).toBe('failure');
    expect(d.message).toMatch(why);
  });

  it('a failure reported 5 minutes ago or more: granted again (a node never retries a rolled-back grant itself)', async () => {
    const rolledBack = (minutesAgo: number) =>
      node(
        {
          spec: { revision: grantV2 },
          status: {
            source: 'Grant',
            appliedChecksum: OLD,
            revision: {
              observedGeneration: 4,
              number: 4,
              checksum: SUM,
              phase: 'RolledBack',
              reason: 'HealthCheckFailed',
              message: 'kubelet unhealthy',
              lastTransitionTime: new Date(NOW.getTime() - minutesAgo * 60_000).toISOString(),
            },
          },
        },
        4,
      );
    expect((await decideUpdate(inputs({ oscNode: rolledBack(4) }))).kind).toBe('failure');
    const again = await decideUpdate(inputs({ oscNode: rolledBack(5) }));
    expect(again).toMatchObject({
      kind: 'grant',
      grant: { osc: 'v2', checksum: SUM, grantedTime: NOW.toISOString() },
      message: expect.stringMatching(/granted again node m-1/) as unknown,
    });
  });

  it('ReplacementNeeded on the node: Failure', async () => {
    const n = node(
      {
        spec: { revision: grantV2 },
        status: {
          source: 'Grant',
          desiredChecksum: SUM,
          needsReplacement: true,
          lastError: { message: 'spec.type changed', time: NOW.toISOString() },
        },
      },
      4,
    );
    const d = await decideUpdate(inputs({ oscNode: n }));
    expect(d).toMatchObject({ kind: 'failure' });
    expect(d.message).toMatch(/ReplacementNeeded.*spec.type changed/);
  });

  it('an agent that follows a Secret (not grants): Failure that says to use grant mode', async () => {
    const d = await decideUpdate(inputs({ oscNode: node({ status: { source: 'Secret' } }) }));
    expect(d.kind).toBe('failure');
    expect(d.message).toMatch(/grant mode \(oscar agent --osc\)/);
  });

  it('no node report yet, or the target not rendered: in progress, waiting', async () => {
    expect(await decideUpdate(inputs({ oscNode: undefined }))).toMatchObject({
      kind: 'progress',
      message: expect.stringMatching(/waiting for the agent of node m-1/) as unknown,
    });
    expect(await decideUpdate(inputs({ target: { missing: 'not rendered' } }))).toMatchObject({
      kind: 'progress',
      message: 'not rendered',
    });
  });
});

describe('UpdateMachine: request and response', () => {
  it('reads which Machine and OscarConfig the request is about (one namespace)', () => {
    expect(
      requestTarget({
        desired: {
          machine: { metadata: { name: 'm-1', namespace: 'pools' } },
          bootstrapConfig: {
            apiVersion: 'bootstrap.oscar.dev/v1alpha1',
            kind: 'OscarConfig',
            metadata: { name: 'm-1', namespace: 'pools' },
            spec: { reconcileRef: { name: 'v2' } },
          },
        },
      }),
    ).toEqual({ namespace: 'pools', machine: 'm-1', config: 'm-1' });
    expect(
      requestTarget({
        desired: {
          machine: { metadata: { name: 'm-1' } },
          bootstrapConfig: { apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2' },
        },
      }),
    ).toHaveProperty('notOscar');
  });

  it('acts on the stored objects, not on the body: the Machine marked in progress by Cluster API, naming the config; the stored reconcileRef', () => {
    const machine = (annotations: Record<string, string>, config = 'm-1') => ({
      metadata: { name: 'm-1', annotations },
      spec: {
        bootstrap: {
          configRef: { apiGroup: 'bootstrap.oscar.dev', kind: 'OscarConfig', name: config },
        },
      },
    });
    const marked = { 'in-place-updates.internal.cluster.x-k8s.io/update-in-progress': '' };
    const stored = { spec: { reconcileRef: { name: 'v2' } } };
    expect(storedTarget('pools', 'm-1', 'm-1', machine(marked), stored)).toEqual({
      node: 'm-1',
      reconcile: 'v2',
    });
    expect(storedTarget('pools', 'm-1', 'm-1', undefined, stored)).toEqual({
      refused: 'Machine pools/m-1 not found',
    });
    expect(storedTarget('pools', 'm-1', 'm-1', machine({}), stored)).toMatchObject({
      refused: expect.stringMatching(/not being updated in place/) as unknown,
    });
    expect(storedTarget('pools', 'm-1', 'm-1', machine(marked, 'other'), stored)).toMatchObject({
      refused: expect.stringMatching(/does not name OscarConfig m-1/) as unknown,
    });
    expect(storedTarget('pools', 'm-1', 'm-1', machine(marked), undefined)).toMatchObject({
      refused: expect.stringMatching(/OscarConfig pools\/m-1 not found/) as unknown,
    });
  });

  it('done is Success with retryAfterSeconds 0; in progress > 0; failure is Failure', () => {
    expect(response({ kind: 'done', message: 'ok' })).toEqual({
      apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
      kind: 'UpdateMachineResponse',
      status: 'Success',
      message: 'ok',
      retryAfterSeconds: 0,
    });
    expect(response({ kind: 'progress', message: 'x', retryAfterSeconds: 5 })).toMatchObject({
      status: 'Success',
      retryAfterSeconds: 5,
    });
    expect(response({ kind: 'failure', message: 'x' })).toMatchObject({ status: 'Failure' });
  });
});

describe('UpdateMachine: tenancy (a node of another namespace is never granted)', () => {
  const tenantB = { namespace: 'team-b', osc: 'prod' };
  it('refuses a node whose grant is another namespace’s, naming neither it nor its OSC', async () => {
    const theirs = node({ spec: { revision: { ...grantV2, ...tenantB } } });
    const d = await decideUpdate(inputs({ oscNode: theirs }));
    expect(d).toMatchObject({
      kind: 'failure',
      message: expect.stringMatching(/not this Machine's/) as unknown,
    });
    expect(d.message).not.toMatch(/team-b|prod/);
  });
  it('refuses a node that reports another namespace’s OSC before any grant', async () => {
    const theirs = node();
    theirs.status = { ...theirs.status, oscRef: { namespace: 'team-b', name: 'prod' } };
    expect((await decideUpdate(inputs({ oscNode: theirs }))).kind).toBe('failure');
  });
  it('grants this namespace’s node (positive control), whatever it reports once granted here', async () => {
    expect((await decideUpdate(inputs())).kind).toBe('grant');
    const ours = node({ spec: { revision: { ...grantV2, osc: 'v1', checksum: OLD } } });
    ours.status = { ...ours.status, oscRef: { namespace: 'team-b', name: 'prod' } };
    expect((await decideUpdate(inputs({ oscNode: ours }))).kind).toBe('grant');
  });
});

describe('UpdateMachine: hostile requests (red-team round 3)', () => {
  const config = (namespace: string) => ({
    apiVersion: 'bootstrap.oscar.dev/v1alpha1',
    kind: 'OscarConfig',
    metadata: { name: 'm-1', namespace },
  });

  it("a Machine of one namespace with another namespace's OscarConfig is not oscar's to act on", () => {
    expect(
      requestTarget({
        desired: {
          machine: { metadata: { name: 'm-1', namespace: 'a' } },
          bootstrapConfig: config('b'),
        },
      }),
    ).toHaveProperty('notOscar');
    expect(
      requestTarget({
        desired: { machine: { metadata: { name: 'm-1' } }, bootstrapConfig: config('b') },
      }),
    ).toHaveProperty('notOscar');
  });

  it('unknown fields change nothing: the same target is read (positive control for the refusal above)', () => {
    const hostile = JSON.parse(
      JSON.stringify({
        desired: {
          machine: {
            metadata: { name: 'm-1', namespace: 'a', extra: { namespace: 'b' } },
            spec: { x: 1 },
          },
          bootstrapConfig: {
            ...config('a'),
            spec: { reconcileRef: { name: 'other' } },
            status: { y: 2 },
          },
          infrastructureMachine: { metadata: { namespace: 'b' } },
        },
        current: { machine: { metadata: { namespace: 'b' } } },
        unknown: ['x'],
      }),
    ) as Parameters<typeof requestTarget>[0];
    expect(requestTarget(hostile)).toEqual({ namespace: 'a', machine: 'm-1', config: 'm-1' });
  });
});
