/**
 * The node's own identity (docs/identity.md): a short-lived client certificate, CN=oscar:node:
 * <machine>, O=oscar:nodes, O=oscar:config:<the OscarConfig's UID>, obtained once with the machine's bootstrap token and renewed with
 * itself. As KubeCredentials it gives every request the current key and certificate (and the
 * bootstrap kubeconfig's server and CA): a renewal swaps them under the running agent, so no unit
 * restarts and the open watch stays (its connection keeps the certificate it was opened with,
 * valid until it expires; new requests dial with the new one).
 *
 * Order on start: a stored certificate that names this machine and config UID and has not expired is used as
 * is (after a reboot: no token needed). Otherwise the key waiting in pending.key (or a new one)
 * is sent in a CSR named after the key, so a restart while it is pending finds the same CSR;
 * the certificate is stored with its key in one file before it is used.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import type { RequestOptions } from 'node:https';
import { ApiError, type KubeHttp } from '../../kube/client.js';
import type { KubeCredentials } from '../../kube/credentials.js';
import {
  NODE_SIGNER,
  NODE_USAGES,
  NODES_GROUP,
  configGroup,
  csrNameFor,
  nodeUser,
} from '../../api/identity.js';
import type { Logger } from '../../log/logger.js';
import { certificateRequest, newNodeKey, publicKeyDigest } from './csr.js';
import { CertificateStore, unusable, type NodeCertificate } from './store.js';
import { sleep } from '../../api/util.js';

const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

/** The CSR was denied, or the API server refused to take it: the machine cannot join as is. */
export class IdentityError extends Error {
  override name = 'IdentityError';
}

interface CsrStatus {
  status?: {
    certificate?: string;
    conditions?: { type: string; reason?: string; message?: string }[];
  };
}

export interface IdentityOptions {
  machine: string;
  /**
   * The UID of the OscarConfig that bootstrapped the machine (--config-uid, in the user data's
   * unit): the certificate's second organisation, which binds it to that config alone; a
   * renewal keeps it.
   */
  configUid: string;
  store: CertificateStore;
  /** The bootstrap kubeconfig's credentials: the server and CA, and the token (first time only). */
  bootstrap: KubeCredentials;
  /** An HTTP client on some credentials (the bootstrap's, or the node's own for a renewal). */
  httpFor(credentials: KubeCredentials): KubeHttp;
  lifetimeSeconds: number;
  log: Logger;
  now?: () => Date;
  random?: () => number;
  pollMs?: number;
  /** How long to wait for an approval before giving up (the unit restarts the agent). */
  waitMs?: number;
}

/**
 * When to renew a certificate valid from `from` to `to`: at 70–90 % of its life (`random` in
 * [0, 1) picks where), so a fleet does not renew at once and a failed attempt has time to retry.
 */
export function renewAt(from: Date, to: Date, random: number): Date {
  const life = to.getTime() - from.getTime();
  return new Date(from.getTime() + life * (0.7 + 0.2 * random));
}

export class NodeIdentity implements KubeCredentials {
  private current: NodeCertificate | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  readonly origin: string;

  constructor(private readonly o: IdentityOptions) {
    this.origin = `certificate ${nodeUser(o.machine)} (${o.store.dir})`;
  }

  get certificate(): NodeCertificate | undefined {
    return this.current;
  }

  getCurrentCluster(): { server: string; caPem?: string } | null {
    return this.o.bootstrap.getCurrentCluster();
  }

  async applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    const c = this.current;
    if (!c) throw new IdentityError('the node has no certificate yet');
    await this.o.bootstrap.applyToHTTPSOptions(opts);
    // The server and CA of the bootstrap kubeconfig; never its token.
    const headers = { ...(opts.headers as Record<string, string> | undefined) };
    delete headers.Authorization;
    delete headers.authorization;
    opts.headers = headers;
    delete opts.auth;
    opts.cert = c.certPem;
    opts.key = c.keyPem;
  }

  /** What this node's certificate names: its machine's user, the nodes' group, its config's UID. */
  private subject(): { commonName: string; organizations: string[] } {
    return {
      commonName: nodeUser(this.o.machine),
      organizations: [NODES_GROUP, configGroup(this.o.configUid)],
    };
  }

  private now(): Date {
    return (this.o.now ?? (() => new Date()))();
  }

  /** A stored certificate if usable, else one requested with the bootstrap token. */
  async ensure(): Promise<NodeCertificate> {
    const { store, log, machine } = this.o;
    let stored: NodeCertificate | undefined;
    try {
      stored = await store.load();
    } catch (error) {
      log.warn(
        { error: (error as Error).message },
        'the stored certificate is unusable; requesting a new one',
      );
    }
    if (stored) {
      const why = unusable(stored, this.subject(), this.now());
      if (why === undefined) {
        this.current = stored;
        log.info(
          { user: nodeUser(machine), notAfter: new Date(stored.cert.validTo).toISOString() },
          'using the stored node certificate',
        );
        return stored;
      }
      log.warn(
        { why },
        'the stored certificate cannot be used; requesting a new one with the bootstrap token',
      );
    }
    this.current = await this.request(this.o.bootstrap, 'bootstrap token');
    return this.current;
  }

  /** Renews at 70–90 % of the certificate's life; retries with backoff until it expires. */
  startRenewal(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private schedule(delayMs?: number): void {
    if (this.stopped || !this.current) return;
    const c = this.current.cert;
    const at = renewAt(
      new Date(c.validFrom),
      new Date(c.validTo),
      (this.o.random ?? Math.random)(),
    );
    const ms = delayMs ?? Math.max(0, at.getTime() - this.now().getTime());
    this.o.log.info(
      { renewAt: new Date(this.now().getTime() + ms).toISOString() },
      'certificate renewal scheduled',
    );
    this.timer = setTimeout(
      () => {
        void this.renew();
      },
      Math.min(ms, 2 ** 31 - 1),
    );
    this.timer.unref();
  }

  /**
   * Renews now, as the timer does at 70–90 %, and schedules the next renewal from the new
   * certificate: SIGHUP (`systemctl reload oscar-agent`) asks for it, and the tests observe one.
   */
  async renewNow(): Promise<NodeCertificate> {
    if (this.timer) clearTimeout(this.timer);
    this.current = await this.request(this, 'node certificate');
    this.o.log.info(
      { notAfter: new Date(this.current.cert.validTo).toISOString(), asked: true },
      'renewed the node certificate',
    );
    this.schedule();
    return this.current;
  }

  private async renew(): Promise<void> {
    try {
      this.current = await this.request(this, 'node certificate');
      this.o.log.info(
        { notAfter: new Date(this.current.cert.validTo).toISOString() },
        'renewed the node certificate',
      );
      this.schedule();
    } catch (error) {
      const left = this.current
        ? new Date(this.current.cert.validTo).getTime() - this.now().getTime()
        : 0;
      const retryMs = Math.max(5_000, Math.min(300_000, left / 10));
      this.o.log.warn(
        { error: (error as Error).message, retryInMs: retryMs },
        'certificate renewal failed; will retry',
      );
      this.schedule(retryMs);
    }
  }

  /** One CSR (made with `via`'s credentials), waited for until issued or refused; stored. */
  private async request(via: KubeCredentials, what: string): Promise<NodeCertificate> {
    const { store, machine, log } = this.o;
    const key: KeyObject = (await store.loadPendingKey()) ?? newNodeKey();
    await store.savePendingKey(key);
    const name = csrNameFor(machine, publicKeyDigest(key));
    const http = this.o.httpFor(via);
    const pem = certificateRequest(key, this.subject());
    try {
      await http.request('POST', CSR_PATH, {
        body: {
          apiVersion: 'certificates.k8s.io/v1',
          kind: 'CertificateSigningRequest',
          metadata: { name },
          spec: {
            request: Buffer.from(pem).toString('base64'),
            signerName: NODE_SIGNER,
            usages: [...NODE_USAGES],
            expirationSeconds: this.o.lifetimeSeconds,
          },
        },
      });
      log.info({ csr: name, with: what }, 'requested a node certificate');
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 409)) {
        if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
          throw new IdentityError(
            `the API server refused the certificate request made with the ${what} (${String(error.status)} ${error.reason}: ${error.message}); a used or expired bootstrap token cannot be used again: re-provision the machine (new user data)`,
          );
        }
        throw error;
      }
      log.info({ csr: name }, 'the certificate request exists already (a restart); waiting for it');
    }
    let certPem: string;
    try {
      certPem = await this.waitForCertificate(http, name);
    } catch (error) {
      // A refused request is final; the next attempt (a restart) makes a new key and request.
      if (error instanceof IdentityError) await store.clearPendingKey();
      throw error;
    }
    const keyPem = key.export({ type: 'pkcs8', format: 'pem' }).toString();
    createPrivateKey(keyPem); // a key we can read back, before it replaces the old one
    const saved = await store.save(keyPem, certPem);
    await store.clearPendingKey();
    return saved;
  }

  private async waitForCertificate(http: KubeHttp, name: string): Promise<string> {
    const pollMs = this.o.pollMs ?? 1000;
    const deadline = Date.now() + (this.o.waitMs ?? 15 * 60_000);
    for (;;) {
      if (this.stopped) throw new IdentityError('stopped while waiting for the certificate');
      const csr = await http.request<CsrStatus>('GET', `${CSR_PATH}/${name}`);
      const conditions = csr.status?.conditions ?? [];
      const refused = conditions.find((c) => c.type === 'Denied' || c.type === 'Failed');
      if (refused) {
        throw new IdentityError(
          `certificate request ${name} ${refused.type === 'Denied' ? 'denied' : 'failed'}: ${refused.reason ?? ''}: ${refused.message ?? ''}`,
        );
      }
      const cert = csr.status?.certificate;
      if (cert) return Buffer.from(cert, 'base64').toString('utf8');
      if (Date.now() > deadline) {
        throw new IdentityError(`certificate request ${name} was not approved in time`);
      }
      await sleep(pollMs);
    }
  }
}
