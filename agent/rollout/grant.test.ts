import { describe, expect, it } from 'vitest';
import { parseGrant } from './grant.js';

const scope = { namespace: 'ns', osc: 'w' };
const base = {
  namespace: 'ns',
  osc: 'w',
  number: 3,
  secretName: 'oscar-w-rev-2',
  checksum: 'a'.repeat(64),
  grantedTime: '2026-12-03T10:00:00.000Z',
};
const node = (revision: unknown, generation = 4) => ({
  metadata: { name: 'n1', generation },
  spec: { revision },
});

describe('parseGrant', () => {
  it('reads a plain grant and a try grant with defaults for the checks', () => {
    expect(parseGrant(node(base), scope)).toEqual({
      generation: 4,
      osc: 'w',
      number: 3,
      secretName: 'oscar-w-rev-2',
      checksum: 'a'.repeat(64),
      grantedTime: '2026-12-03T10:00:00.000Z',
      canary: false,
    });
    const g = parseGrant(
      node({
        ...base,
        canary: true,
        try: {
          soakSeconds: 30,
          deadlineSeconds: 300,
          healthChecks: [
            { name: 'kubelet', httpGet: { port: 10248, path: '/healthz' } },
            {
              name: 'x',
              exec: { command: ['/bin/true', '-v'] },
              timeoutSeconds: 2,
              periodSeconds: 1,
            },
          ],
        },
      }),
      scope,
    );
    expect(g?.canary).toBe(true);
    expect(g?.try).toEqual({
      soakMs: 30_000,
      deadlineMs: 300_000,
      checks: [
        {
          name: 'kubelet',
          kind: 'httpGet',
          port: 10248,
          path: '/healthz',
          scheme: 'HTTP',
          timeoutMs: 5000,
          periodMs: 5000,
          failureThreshold: 3,
        },
        {
          name: 'x',
          kind: 'exec',
          command: ['/bin/true', '-v'],
          timeoutMs: 2000,
          periodMs: 1000,
          failureThreshold: 3,
        },
      ],
    });
  });

  it("another OSC of its namespace (Cluster API's in-place update moves the node): a revision slot or the reconcile Secret of that OSC", () => {
    expect(parseGrant(node({ ...base, osc: 'w2', secretName: 'oscar-w2-rev-0' }), scope)).toEqual(
      expect.objectContaining({ osc: 'w2', secretName: 'oscar-w2-rev-0' }),
    );
    expect(
      parseGrant(node({ ...base, osc: 'w2', secretName: 'oscar-w2-reconcile' }), scope),
    ).toEqual(expect.objectContaining({ osc: 'w2', secretName: 'oscar-w2-reconcile' }));
    expect(parseGrant(node({ ...base, secretName: 'oscar-w-reconcile' }), scope)).toEqual(
      expect.objectContaining({ osc: 'w', secretName: 'oscar-w-reconcile' }),
    );
  });

  it('no grant: undefined', () => {
    expect(parseGrant({ metadata: { name: 'n1' } }, scope)).toBeUndefined();
    expect(parseGrant(node(null), scope)).toBeUndefined();
  });

  it.each([
    [
      'another namespace',
      { ...base, namespace: 'kube-system' },
      /names namespace kube-system, but this agent follows OSCs in ns/,
    ],
    [
      'a Secret that is no revision of its OSC',
      { ...base, secretName: 'oscar-w-provision' },
      /not a revision Secret of w/,
    ],
    [
      'another OSC with a Secret of its own OSC',
      { ...base, osc: 'other', secretName: 'oscar-w-rev-2' },
      /not a revision Secret of other/,
    ],
    ['no OSC', { ...base, osc: '' }, /spec.revision.osc must be a string/],
    [
      'a Secret of another OSC',
      { ...base, secretName: 'oscar-x-rev-0' },
      /not a revision Secret of w/,
    ],
    [
      'a checksum that is not sha256 hex',
      { ...base, checksum: 'A'.repeat(64) },
      /64 lowercase hex/,
    ],
    ['a revision 0', { ...base, number: 0 }, /spec.revision.number must be a whole number/],
    [
      'a relative program',
      {
        ...base,
        try: {
          soakSeconds: 1,
          deadlineSeconds: 9,
          healthChecks: [{ name: 'a', exec: { command: ['sh', '-c', 'x'] } }],
        },
      },
      /exec.command\[0\] must be an absolute path/,
    ],
    [
      'two kinds in one check',
      {
        ...base,
        try: {
          soakSeconds: 1,
          deadlineSeconds: 9,
          healthChecks: [{ name: 'a', exec: { command: ['/bin/true'] }, httpGet: { port: 1 } }],
        },
      },
      /exactly one of exec, httpGet/,
    ],
    [
      'a port out of range',
      {
        ...base,
        try: {
          soakSeconds: 1,
          deadlineSeconds: 9,
          healthChecks: [{ name: 'a', httpGet: { port: 0 } }],
        },
      },
      /httpGet.port must be a whole number from 1 to 65535/,
    ],
    [
      'a path with a space',
      {
        ...base,
        try: {
          soakSeconds: 1,
          deadlineSeconds: 9,
          healthChecks: [{ name: 'a', httpGet: { port: 80, path: '/a b' } }],
        },
      },
      /path must start with "\/"/,
    ],
    [
      'a NUL in an argument',
      {
        ...base,
        try: {
          soakSeconds: 1,
          deadlineSeconds: 9,
          healthChecks: [{ name: 'a', exec: { command: ['/bin/echo', 'a\0b'] } }],
        },
      },
      /command\[1\] must be a string/,
    ],
    [
      'a huge timeout',
      {
        ...base,
        try: {
          soakSeconds: 1,
          deadlineSeconds: 9,
          healthChecks: [{ name: 'a', exec: { command: ['/bin/true'] }, timeoutSeconds: 99999 }],
        },
      },
      /timeoutSeconds must be a whole number from 1 to 300/,
    ],
    [
      'too many checks',
      {
        ...base,
        try: {
          soakSeconds: 1,
          deadlineSeconds: 9,
          healthChecks: Array.from({ length: 17 }, (_, i) => ({
            name: `c${String(i)}`,
            exec: { command: ['/bin/true'] },
          })),
        },
      },
      /at most 16/,
    ],
    [
      'a deadline of 0',
      { ...base, try: { soakSeconds: 1, deadlineSeconds: 0 } },
      /deadlineSeconds must be a whole number from 1/,
    ],
  ])('refuses %s, naming the field', (_what, revision, message) => {
    expect(() => parseGrant(node(revision), scope)).toThrow(message);
  });
});
