import { describe, expect, it } from 'vitest';
import { ApiError, type KubeHttp } from '../../kube/client.js';
import {
  judgeNode,
  KubeNodeReadiness,
  waitNodeReady,
  type NodeFacts,
  type NodeReadiness,
} from './node-ready.js';

function node(ready: string | undefined, bootID?: string): NodeFacts {
  return {
    status: {
      ...(ready ? { conditions: [{ type: 'Ready', status: ready, reason: 'KubeletReady' }] } : {}),
      ...(bootID ? { nodeInfo: { bootID } } : {}),
    },
  };
}

describe('judgeNode: Ready, reported by kubelet of this boot', () => {
  it('Ready with this boot id is ready', () => {
    expect(judgeNode('n', node('True', 'b2'), 'b2').kind).toBe('ready');
  });
  it('Ready from the boot before (the Node still carries the old boot id) is not', () => {
    const r = judgeNode('n', node('True', 'b1'), 'b2');
    expect(r).toMatchObject({ kind: 'notReady' });
    expect(r.message).toContain('bootID b1');
  });
  it('NotReady, Unknown or no Ready condition is not ready, and says which', () => {
    expect(judgeNode('n', node('False', 'b2'), 'b2').message).toContain('Ready=False');
    expect(judgeNode('n', node('Unknown', 'b2'), 'b2').kind).toBe('notReady');
    expect(judgeNode('n', node(undefined, 'b2'), 'b2').message).toContain('no Ready condition');
  });
  it('without a boot id on either side the condition alone decides', () => {
    expect(judgeNode('n', node('True'), 'b2').kind).toBe('ready');
    expect(judgeNode('n', node('True', 'b1'), undefined).kind).toBe('ready');
    expect(judgeNode('n', node('False'), undefined).kind).toBe('notReady');
  });
});

/** A KubeHttp answering GET of one path from a script. */
function api(answer: () => unknown): KubeHttp & { paths: string[] } {
  const paths: string[] = [];
  return {
    paths,
    request<T>(method: string, path: string): Promise<T> {
      paths.push(`${method} ${path}`);
      return new Promise<T>((resolve) => {
        resolve(answer() as T); // a throw rejects the promise
      });
    },
    stream: () => Promise.reject(new Error('no watch here')),
  };
}

describe('KubeNodeReadiness: reads only its own Node', () => {
  it('GETs /api/v1/nodes/NAME and judges it against the boot id', async () => {
    const h = api(() => node('True', 'b2'));
    const probe = new KubeNodeReadiness(h, 'node-1', () => Promise.resolve('b2'));
    expect(await probe.check()).toMatchObject({ kind: 'ready' });
    expect(h.paths).toEqual(['GET /api/v1/nodes/node-1']);
  });
  it('404: a machine without kubelet (absent); 403: may not read it (forbidden); else unreachable', async () => {
    const fails = (e: Error) =>
      new KubeNodeReadiness(
        api(() => {
          throw e;
        }),
        'n',
        () => Promise.resolve(undefined),
      ).check();
    expect(await fails(new ApiError(404, 'NotFound', 'nodes "n" not found'))).toMatchObject({
      kind: 'absent',
    });
    const forbidden = await fails(new ApiError(403, 'Forbidden', 'no'));
    expect(forbidden.kind).toBe('forbidden');
    expect(forbidden.message).toContain('deploy/agent-rbac.yaml');
    expect(await fails(new Error('connect ECONNREFUSED'))).toMatchObject({
      kind: 'unreachable',
      message: expect.stringContaining('ECONNREFUSED') as unknown,
    });
  });
});

describe('waitNodeReady: until Ready or the deadline', () => {
  function scripted(answers: NodeReadiness[]) {
    let i = 0;
    return {
      node: 'n',
      calls: () => i,
      check: () => Promise.resolve(answers[Math.min(i++, answers.length - 1)]!),
    };
  }
  const notReady: NodeReadiness = { kind: 'notReady', message: 'Node n is not Ready' };
  const ctxOf = (reports: string[]) => ({
    report: (reason: string, message: string) => {
      reports.push(`${reason}: ${message}`);
    },
  });

  it('waits while NotReady (reported once), confirms once Ready', async () => {
    const probe = scripted([
      notReady,
      notReady,
      { kind: 'ready', message: 'Node n Ready in this boot' },
    ]);
    const reports: string[] = [];
    const v = await waitNodeReady({
      probe,
      deadline: Date.now() + 10_000,
      signal: new AbortController().signal,
      ctx: ctxOf(reports),
      intervalMs: 1,
    });
    expect(v).toEqual({ kind: 'confirmed', message: 'Node n Ready in this boot' });
    expect(probe.calls()).toBe(3);
    expect(reports).toEqual([
      'NodeNotReady: waiting for the Node after the reboot: Node n is not Ready',
    ]);
  });

  it('a machine without a Node, or an identity that may not read it, does not block', async () => {
    for (const kind of ['absent', 'forbidden'] as const) {
      const v = await waitNodeReady({
        probe: scripted([{ kind, message: kind }]),
        deadline: Date.now(), // even at the deadline: nothing to wait for
        signal: new AbortController().signal,
        ctx: ctxOf([]),
      });
      expect(v).toEqual({ kind: 'confirmed', message: kind });
    }
  });

  it('NotReady at the deadline fails the try (NodeNotReady); an unreadable Node is APIUnreachable', async () => {
    let t = 0;
    const v = await waitNodeReady({
      probe: scripted([notReady]),
      deadline: 5,
      signal: new AbortController().signal,
      ctx: ctxOf([]),
      intervalMs: 1,
      now: () => t++,
    });
    expect(v).toMatchObject({ kind: 'failed', reason: 'NodeNotReady' });
    const u = await waitNodeReady({
      probe: scripted([{ kind: 'unreachable', message: 'cannot read Node n: timeout' }]),
      deadline: 0,
      signal: new AbortController().signal,
      ctx: ctxOf([]),
      now: () => 1,
    });
    expect(u).toMatchObject({ kind: 'failed', reason: 'APIUnreachable' });
  });

  it('a newer grant (the abort) interrupts the wait', async () => {
    const ac = new AbortController();
    const wait = waitNodeReady({
      probe: scripted([notReady]),
      deadline: Date.now() + 60_000,
      signal: ac.signal,
      ctx: ctxOf([]),
      intervalMs: 60_000,
    });
    setTimeout(() => {
      ac.abort();
    }, 20);
    expect(await wait).toEqual({ kind: 'interrupted' });
  });
});
