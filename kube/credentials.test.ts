import { createServer, type Server } from 'node:https';
import { TLSSocket } from 'node:tls';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { TestPki } from '../hack/testenv/certs.js';
import { requireTool } from '../test/support/tools.js';
import {
  credentialsFromKubeconfig,
  inClusterCredentials,
  kubeHttp,
  loadKubeCredentials,
  type KubeCredentials,
} from './credentials.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-kube-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const b64 = (s: string): string => Buffer.from(s).toString('base64');

function kubeconfig(user: Record<string, unknown>, cluster: Record<string, unknown> = {}) {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'ctx',
    clusters: [{ name: 'c', cluster: { server: 'https://10.0.0.1:6443/', ...cluster } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
  };
}

async function options(creds: KubeCredentials | undefined) {
  if (!creds) throw new Error('no credentials');
  const opts: import('node:https').RequestOptions = {};
  await creds.applyToHTTPSOptions(opts);
  return opts;
}

describe('the agent kubeconfig', () => {
  it('--context picks a context other than current-context; an unknown one is named', async () => {
    const doc = kubeconfig({ token: 'a' });
    doc.clusters.push({ name: 'd', cluster: { server: 'https://10.0.0.2:6443' } });
    doc.contexts.push({ name: 'other', context: { cluster: 'd', user: 'u' } });
    const creds = credentialsFromKubeconfig(doc, { base: dir, origin: 't', context: 'other' });
    expect(creds?.getCurrentCluster()?.server).toBe('https://10.0.0.2:6443');
    expect(() =>
      credentialsFromKubeconfig(doc, { base: dir, origin: 't', context: 'nope' }),
    ).toThrow('contexts: no entry named "nope"');
    const path = join(dir, 'ctx.yaml');
    await writeFile(path, JSON.stringify(doc));
    const loaded = await loadKubeCredentials(path, 'other');
    expect(loaded.getCurrentCluster()?.server).toBe('https://10.0.0.2:6443');
    expect(loaded.origin).toContain('(context other)');
  });

  it('inline CA and client certificate; the server without its trailing slash', async () => {
    const creds = credentialsFromKubeconfig(
      kubeconfig(
        { 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY') },
        { 'certificate-authority-data': b64('CA'), 'tls-server-name': 'api.internal' },
      ),
      { base: dir, origin: 'test' },
    );
    expect(creds?.getCurrentCluster()).toEqual({ server: 'https://10.0.0.1:6443', caPem: 'CA' });
    const o = await options(creds);
    expect([o.ca, o.cert, o.key].map((b) => (b as Buffer).toString())).toEqual([
      'CA',
      'CERT',
      'KEY',
    ]);
    expect(o.servername).toBe('api.internal');
    expect(o.rejectUnauthorized).toBeUndefined();
    expect(o.headers).toBeUndefined();
  });

  it('files relative to the kubeconfig, a token, basic auth, insecure-skip-tls-verify', async () => {
    const read = (p: string): Buffer => Buffer.from(`content of ${p}`);
    const creds = credentialsFromKubeconfig(
      kubeconfig(
        { token: 'secret-token', username: 'alice', password: 'pw' },
        { 'certificate-authority': 'pki/ca.crt', 'insecure-skip-tls-verify': true },
      ),
      { base: '/etc/oscar', origin: 'test', read },
    );
    const o = await options(creds);
    expect(String(o.ca)).toBe('content of /etc/oscar/pki/ca.crt');
    expect(o.rejectUnauthorized).toBe(false);
    expect(o.headers).toEqual({ Authorization: 'Bearer secret-token' });
    expect(o.auth).toBe('alice:pw');
  });

  it('re-reads a token file after a minute (rotated ServiceAccount tokens)', async () => {
    const tokenFile = join(dir, 'token');
    await writeFile(tokenFile, 'one\n');
    let now = 0;
    const creds = credentialsFromKubeconfig(kubeconfig({ tokenFile }), {
      base: dir,
      origin: 'test',
      now: () => now,
    });
    expect((await options(creds)).headers).toEqual({ Authorization: 'Bearer one' });
    await writeFile(tokenFile, 'two\n');
    now = 59_000;
    expect((await options(creds)).headers).toEqual({ Authorization: 'Bearer one' });
    now = 60_000;
    expect((await options(creds)).headers).toEqual({ Authorization: 'Bearer two' });
  });

  it('hands exec and auth-provider users to client-node (undefined here)', () => {
    const opts = { base: dir, origin: 'test' };
    expect(credentialsFromKubeconfig(kubeconfig({ exec: { command: 'x' } }), opts)).toBeUndefined();
    expect(
      credentialsFromKubeconfig(kubeconfig({ 'auth-provider': { name: 'oidc' } }), opts),
    ).toBeUndefined();
  });

  it('names the field and the fix when the kubeconfig is wrong', () => {
    const opts = { base: dir, origin: 'test' };
    const load = (doc: unknown) => () => credentialsFromKubeconfig(doc, opts);
    expect(load('text')).toThrow(/expected a mapping/);
    expect(load({ ...kubeconfig({}), 'current-context': undefined })).toThrow(
      /current-context: missing; set it \(kubectl config use-context NAME\)/,
    );
    expect(load({ ...kubeconfig({}), 'current-context': 'other' })).toThrow(
      /contexts: no entry named "other"/,
    );
    expect(load(kubeconfig({}, { server: '' }))).toThrow(
      /clusters\[name=c\]\.cluster\.server: missing \(https:\/\/HOST:PORT\)/,
    );
    expect(load(kubeconfig({}, { server: 'not a url' }))).toThrow(
      /server: "not a url" is not a URL/,
    );
    expect(load(kubeconfig({ 'client-certificate-data': b64('C') }))).toThrow(
      /users\[name=u\]\.user: client-certificate and client-key go together/,
    );
    expect(load(kubeconfig({ token: 42 }))).toThrow(
      /users\[name=u\]\.user\.token: must be a string/,
    );
    expect(load(kubeconfig({}, { 'certificate-authority': 'missing.crt' }))).toThrow(
      /clusters\[name=c\]\.cluster\.certificate-authority: cannot read .*missing\.crt/,
    );
  });

  it('loads YAML and JSON files and prefixes errors with the file', async () => {
    const ca = join(dir, 'ca.crt');
    await writeFile(ca, 'CA PEM');
    const doc = kubeconfig({ token: 't' }, { 'certificate-authority': 'ca.crt' });
    for (const [name, text] of [
      ['k.yaml', stringify(doc)],
      ['k.json', JSON.stringify(doc)],
    ] as const) {
      await writeFile(join(dir, name), text);
      const creds = await loadKubeCredentials(join(dir, name));
      expect(creds.origin).toBe(`kubeconfig ${join(dir, name)}`);
      expect(String((await options(creds)).ca)).toBe('CA PEM');
    }
    await writeFile(join(dir, 'bad.yaml'), stringify({ ...doc, 'current-context': 'x' }));
    await expect(loadKubeCredentials(join(dir, 'bad.yaml'))).rejects.toThrow(
      `kubeconfig ${join(dir, 'bad.yaml')}: contexts: no entry named "x"`,
    );
    await expect(loadKubeCredentials(join(dir, 'absent.yaml'))).rejects.toThrow(/cannot read/);
  });

  it('the in-cluster ServiceAccount: server from the environment, CA and token files', async () => {
    const sa = join(dir, 'sa');
    await (await import('node:fs/promises')).mkdir(sa, { recursive: true });
    await writeFile(join(sa, 'ca.crt'), 'SA CA');
    await writeFile(join(sa, 'token'), 'sa-token');
    const creds = inClusterCredentials(
      { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
      sa,
    );
    expect(creds.getCurrentCluster()).toEqual({ server: 'https://[fd00::1]:443', caPem: 'SA CA' });
    const o = await options(creds);
    expect(String(o.ca)).toBe('SA CA');
    expect(o.headers).toEqual({ Authorization: 'Bearer sa-token' });
  });
});

describe('the agent kubeconfig over real TLS', () => {
  let server: Server | undefined;
  afterAll(() => {
    server?.close();
  });

  it('kube/client.ts authenticates with these credentials: CA, client certificate, token', async (ctx) => {
    if (!requireTool('openssl', 'apt-get install openssl')) ctx.skip();
    const pki = new TestPki(await mkdtemp(join(dir, 'pki-')));
    await pki.init();
    const serving = await pki.issueServing(['127.0.0.1'], ['localhost']);
    const client = await pki.issueClient('agent', { user: 'system:node:n1', groups: ['g'] });
    const [caPem, certPem, keyPem] = await Promise.all([
      readFile(pki.caPath),
      readFile(serving.certPath),
      readFile(serving.keyPath),
    ]);
    const s = createServer(
      { ca: caPem, cert: certPem, key: keyPem, requestCert: true, rejectUnauthorized: true },
      (req, res) => {
        if (!(req.socket instanceof TLSSocket)) throw new Error('not TLS');
        const peer = req.socket.getPeerCertificate();
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            cn: peer.subject.CN,
            auth: req.headers.authorization ?? null,
            agent: req.headers['user-agent'] ?? null,
          }),
        );
      },
    );
    server = s;
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const port = (s.address() as { port: number }).port;
    const path = join(dir, 'tls.yaml');
    await writeFile(
      path,
      stringify({
        ...kubeconfig(
          { 'client-certificate': client.certPath, 'client-key': client.keyPath, token: 'tok' },
          { server: `https://127.0.0.1:${String(port)}`, 'certificate-authority': pki.caPath },
        ),
      }),
    );
    const ua = 'oscar-agent/0.1.0 (linux/x64) node/v24.22.3';
    const http = kubeHttp(await loadKubeCredentials(path), { userAgent: ua });
    try {
      expect(await http.request('GET', '/api')).toEqual({
        cn: 'system:node:n1',
        auth: 'Bearer tok',
        // each component says who it is: the API server's audit log tells them apart
        agent: ua,
      });
    } finally {
      http.close();
    }
  });
});
