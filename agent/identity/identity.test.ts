import { X509Certificate } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import type { RequestOptions } from 'node:https';
import { chmod, chown, mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { csrNameFor } from '../../api/identity.js';
import { ApiError, type KubeHttp, type RequestSpec } from '../../kube/client.js';
import type { KubeCredentials } from '../../kube/credentials.js';
import { createLogger } from '../../log/logger.js';
import { newNodeKey, publicKeyDigest } from './csr.js';
import { IdentityError, NodeIdentity, renewAt } from './identity.js';
import { CertificateFileError, CertificateStore, subjectAttributes } from './store.js';

let dir = '';
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oscar-identity-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const log = createLogger({ component: 'agent', level: 'silent' });

/** The signer's part: openssl signs the request with a throw-away CA. */
function signed(csrPem: string): string {
  const ca = join(dir, 'ca');
  execFileSync('sh', [
    '-c',
    `[ -f ${ca}.key ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ${ca}.key -out ${ca}.crt -subj /CN=test-ca -days 2 2>/dev/null`,
  ]);
  return execFileSync(
    'openssl',
    [
      'x509',
      '-req',
      '-CA',
      `${ca}.crt`,
      '-CAkey',
      `${ca}.key`,
      '-days',
      '1',
      '-set_serial',
      String(Date.now()),
    ],
    { input: csrPem, stdio: ['pipe', 'pipe', 'ignore'] },
  ).toString();
}

const bootstrap: KubeCredentials = {
  origin: 'test',
  getCurrentCluster: () => ({ server: 'https://127.0.0.1:1' }),
  applyToHTTPSOptions: (opts) => {
    opts.headers = { Authorization: 'Bearer abcdef.0123456789abcdef' };
    return Promise.resolve();
  },
};

interface Created {
  name: string;
  spec: { request: string; expirationSeconds: number };
}

/** An API that signs (or denies) every CSR it is given, recording the requests. */
function fakeApi(behaviour: 'sign' | 'deny' | 'forbid' = 'sign') {
  const created: Created[] = [];
  const http: KubeHttp = {
    request<T>(method: string, path: string, spec?: RequestSpec): Promise<T> {
      if (method === 'POST') {
        if (behaviour === 'forbid') {
          return Promise.reject(new ApiError(401, 'Unauthorized', 'Unauthorized'));
        }
        const body = spec?.body as { metadata: { name: string }; spec: Created['spec'] };
        created.push({ name: body.metadata.name, spec: body.spec });
        return Promise.resolve({} as T);
      }
      const name = path.split('/').pop() ?? '';
      const csr = created.find((c) => c.name === name);
      if (!csr) return Promise.reject(new ApiError(404, 'NotFound', 'not found'));
      if (behaviour === 'deny') {
        return Promise.resolve({
          status: { conditions: [{ type: 'Denied', reason: 'WrongSubject', message: 'no' }] },
        } as T);
      }
      const cert = signed(Buffer.from(csr.spec.request, 'base64').toString());
      return Promise.resolve({
        status: { certificate: Buffer.from(cert).toString('base64') },
      } as T);
    },
    stream: () => Promise.resolve(),
  };
  return { http, created };
}

function identity(http: KubeHttp, machine = 'm1', configUid = 'u1'): NodeIdentity {
  return new NodeIdentity({
    machine,
    configUid,
    store: new CertificateStore(join(dir, 'pki')),
    bootstrap,
    httpFor: () => http,
    lifetimeSeconds: 3600,
    log,
    pollMs: 1,
    waitMs: 5_000,
  });
}

describe('renewAt', () => {
  it('is at 70 % to 90 % of the life', () => {
    const from = new Date(0);
    const to = new Date(1_000_000);
    expect(renewAt(from, to, 0).getTime()).toBe(700_000);
    expect(renewAt(from, to, 0.5).getTime()).toBeCloseTo(800_000, -1);
    expect(renewAt(from, to, 0.999999).getTime()).toBeLessThan(900_000);
  });
});

describe('NodeIdentity', () => {
  it('obtains a certificate with the token; key and certificate 0600 in a 0700 directory', async () => {
    const api = fakeApi();
    const cert = await identity(api.http).ensure();
    expect(cert.cert.subject.split('\n').sort()).toEqual([
      'CN=oscar:node:m1',
      'O=oscar:config:u1',
      'O=oscar:nodes',
    ]);
    expect(api.created).toHaveLength(1);
    expect(api.created[0]?.name).toMatch(/^oscar-m1-[0-9a-f]{10}$/);
    expect(api.created[0]?.spec.expirationSeconds).toBe(3600);
    expect((await stat(join(dir, 'pki', 'node.pem'))).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'pki'))).mode & 0o777).toBe(0o700);
    await expect(stat(join(dir, 'pki', 'pending.key'))).rejects.toThrow();
  });

  it('uses the stored certificate on the next start: no request', async () => {
    await identity(fakeApi().http).ensure();
    const api = fakeApi();
    await identity(api.http).ensure();
    expect(api.created).toHaveLength(0);
  });

  it('asks anew when the stored certificate names another machine', async () => {
    await identity(fakeApi().http, 'm2').ensure();
    const api = fakeApi();
    const cert = await identity(api.http, 'm1').ensure();
    expect(api.created).toHaveLength(1);
    expect(cert.cert.subject).toContain('oscar:node:m1');
  });

  it("asks anew when the stored certificate names another config's UID (a reused machine name)", async () => {
    await identity(fakeApi().http, 'm1', 'u-old').ensure();
    const api = fakeApi();
    const cert = await identity(api.http, 'm1', 'u1').ensure();
    expect(api.created).toHaveLength(1);
    expect(subjectAttributes(cert.cert.subject)).toContain('O=oscar:config:u1');
  });

  it("reads the signer's multi-valued organisation RDN as its organisations", () => {
    expect(subjectAttributes('CN=oscar:node:m1\nO=oscar:nodes + O=oscar:config:u1')).toEqual([
      'CN=oscar:node:m1',
      'O=oscar:config:u1',
      'O=oscar:nodes',
    ]);
  });

  it('gives requests the certificate, never the bootstrap token', async () => {
    const id = identity(fakeApi().http);
    const cert = await id.ensure();
    const opts: RequestOptions = {};
    await id.applyToHTTPSOptions(opts);
    expect((opts.headers as Record<string, string> | undefined)?.Authorization).toBeUndefined();
    expect(opts.cert).toBe(cert.certPem);
    expect(opts.key).toBe(cert.keyPem);
  });

  it('renews under the running identity: a new key and certificate, used at once', async () => {
    const id = identity(fakeApi().http);
    const first = await id.ensure();
    const second = await id.renewNow();
    expect(new X509Certificate(second.certPem).serialNumber).not.toBe(first.cert.serialNumber);
    expect(second.keyPem).not.toBe(first.keyPem);
    const opts: RequestOptions = {};
    await id.applyToHTTPSOptions(opts);
    expect(opts.cert).toBe(second.certPem);
  });

  it('a denied request says why, and its key is dropped (the next start asks anew)', async () => {
    await expect(identity(fakeApi('deny').http).ensure()).rejects.toThrow(
      /denied: WrongSubject: no/,
    );
    await expect(stat(join(dir, 'pki', 'pending.key'))).rejects.toThrow();
  });

  it('a refused token says the machine must be provisioned again', async () => {
    const error = await identity(fakeApi('forbid').http)
      .ensure()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdentityError);
    expect((error as Error).message).toMatch(/cannot be used again: re-provision/);
  });

  it('keeps the pending key across a restart, so the same CSR is found again', async () => {
    const key = newNodeKey();
    await new CertificateStore(join(dir, 'pki')).savePendingKey(key);
    const api = fakeApi();
    await identity(api.http).ensure();
    expect(api.created[0]?.name).toBe(csrNameFor('m1', publicKeyDigest(key)));
  });
});

describe('CertificateStore refusals', () => {
  it('refuses a node.pem that is a symlink', async () => {
    await identity(fakeApi().http).ensure();
    await rm(join(dir, 'pki', 'node.pem'));
    await writeFile(join(dir, 'elsewhere.pem'), 'x');
    await symlink(join(dir, 'elsewhere.pem'), join(dir, 'pki', 'node.pem'));
    await expect(new CertificateStore(join(dir, 'pki')).load()).rejects.toThrow(
      CertificateFileError,
    );
  });

  it('refuses a certificate directory that is a symlink', async () => {
    await writeFile(join(dir, 'target'), '');
    await symlink(join(dir, 'target'), join(dir, 'pki'));
    await expect(identity(fakeApi().http).ensure()).rejects.toThrow(/not a directory|EEXIST/);
  });

  // red-team round 3: a credential at rest is the agent's alone, before and after a rotation
  it('keeps node.pem 0600 in a 0700 directory after a renewal, and narrows a widened one on load', async () => {
    const id = identity(fakeApi().http);
    await id.ensure();
    await id.renewNow();
    const pem = join(dir, 'pki', 'node.pem');
    expect((await stat(pem)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'pki'))).mode & 0o777).toBe(0o700);
    await chmod(pem, 0o644);
    expect(await new CertificateStore(join(dir, 'pki')).load()).toBeDefined();
    expect((await stat(pem)).mode & 0o777).toBe(0o600);
  });

  it('narrows a widened pending.key on load', async () => {
    const store = new CertificateStore(join(dir, 'pki'));
    await store.savePendingKey(newNodeKey());
    expect((await stat(join(dir, 'pki', 'pending.key'))).mode & 0o777).toBe(0o600);
    await chmod(join(dir, 'pki', 'pending.key'), 0o640);
    expect(await store.loadPendingKey()).toBeDefined();
    expect((await stat(join(dir, 'pki', 'pending.key'))).mode & 0o777).toBe(0o600);
  });

  it.skipIf(process.getuid?.() !== 0)(
    'refuses a node.pem, and never uses a pending.key, that another user owns (its owner may know the key)',
    async () => {
      await identity(fakeApi().http).ensure();
      const store = new CertificateStore(join(dir, 'pki'));
      await store.savePendingKey(newNodeKey());
      for (const name of ['node.pem', 'pending.key']) await chown(join(dir, 'pki', name), 1000, 0);
      await expect(store.load()).rejects.toThrow(/node\.pem is owned by uid 1000, not the agent's/);
      expect(await store.loadPendingKey()).toBeUndefined(); // a new key replaces it
    },
  );

  it.skipIf(process.getuid?.() !== 0)(
    'refuses a certificate directory another user owns (its owner could swap the key)',
    async () => {
      await mkdir(join(dir, 'pki'), { mode: 0o700 });
      await chown(join(dir, 'pki'), 1000, 1000);
      await expect(identity(fakeApi().http).ensure()).rejects.toThrow(
        /pki is owned by uid 1000, not the agent's \(0\): its owner could swap the key/,
      );
    },
  );
});
