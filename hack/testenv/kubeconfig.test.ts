import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderKubeconfig } from './kubeconfig.js';

const b64 = (s: string): string => Buffer.from(s).toString('base64');

describe('renderKubeconfig', () => {
  it('embeds the CA and client certificate so the file stands alone', () => {
    const doc = parse(
      renderKubeconfig({
        name: 'alice',
        server: 'https://127.0.0.1:6443',
        caPem: 'CA',
        credentials: { kind: 'clientCert', certPem: 'CERT', keyPem: 'KEY' },
        namespace: 'ns1',
      }),
    ) as unknown;
    expect(doc).toEqual({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'alice',
          cluster: { server: 'https://127.0.0.1:6443', 'certificate-authority-data': b64('CA') },
        },
      ],
      users: [
        {
          name: 'alice',
          user: { 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY') },
        },
      ],
      contexts: [{ name: 'alice', context: { cluster: 'alice', user: 'alice', namespace: 'ns1' } }],
      'current-context': 'alice',
      preferences: {},
    });
  });

  it('writes a bearer token for token users and no namespace when none is given', () => {
    const doc = parse(
      renderKubeconfig({
        name: 'viewer',
        server: 'https://[::1]:6443',
        caPem: 'CA',
        credentials: { kind: 'token', token: 'abc' },
      }),
    ) as { users: unknown; contexts: unknown };
    expect(doc.users).toEqual([{ name: 'viewer', user: { token: 'abc' } }]);
    expect(doc.contexts).toEqual([
      { name: 'viewer', context: { cluster: 'viewer', user: 'viewer' } },
    ]);
  });

  it('refuses a plain-http server', () => {
    expect(() =>
      renderKubeconfig({
        name: 'x',
        server: 'http://127.0.0.1:8080',
        caPem: 'CA',
        credentials: { kind: 'token', token: 't' },
      }),
    ).toThrow(/must be an https:\/\/ URL/);
  });
});
