/**
 * The identity approver (docs/identity.md): watches CertificateSigningRequests (cluster-wide; it
 * reads only spec and conditions, never keys) and decides oscar's own with decide.ts. For a first
 * identity it writes, in this order: the OscarConfig's BootstrapTokenAvailable=False (so the
 * bootstrap controller never reads the missing token as expired), the machine's Role and
 * RoleBinding, the approval, the token's deletion, an Event. A refusal is the CSR's Denied
 * condition with the reason and a Warning Event on the machine's OscarConfig. Any step that fails
 * is retried from the top: each is idempotent, and decide() lets the CSR that consumed a token
 * finish its approval.
 */
import type { KubeHttp } from '../../kube/client.js';
import { errorFields, type Logger } from '../../log/logger.js';
import { dropManagedFields, httpSource, Informer } from '../kube/informer.js';
import type { ControllerMetrics } from '../metrics.js';
import { WorkQueue, type HandlerResult } from '../queue.js';
import { machineOwner } from '../bootstrap/reconcile.js';
import type { ConfigObject } from '../bootstrap/types.js';
import type { BootstrapLink } from './bootstrap-link.js';
import { consumerDone, kubeletBootstraps } from '../bootstrap/consumers.js';
import { decide, decided, type CsrObject, type TokenMachine } from './decide.js';
import { approveAgent } from './agent-approval.js';
import { approveKubelet } from './kubelet-approval.js';
import {
  decideKubelet,
  isKubeletClientRequest,
  type AnyDecision,
  type KubeletMachine,
} from './kubelet.js';
import { MAX_REQUEST_BYTES, parseRequest } from './request.js';
import { CSR_PATH, type IdentityWriter } from './writer.js';

export type { BootstrapLink } from './bootstrap-link.js';

export interface IdentityControllerOptions {
  http: KubeHttp;
  writer: IdentityWriter;
  bootstrap: BootstrapLink;
  maxExpirationSeconds: number;
  log: Logger;
  metrics: ControllerMetrics;
  watchTimeoutSeconds?: number;
}

import { REASON_IDENTITY_ISSUED } from './agent-approval.js';
export { REASON_IDENTITY_ISSUED };
const CONSUMED_BY = /certificate request (\S+) /;

function keyOf(config: ConfigObject): string {
  return `${config.metadata.namespace ?? ''}/${config.metadata.name}`;
}

function machineOf(config: ConfigObject): string {
  return machineOwner(config)?.name ?? config.metadata.name;
}

/** spec.request's bytes; an oversized one is cut at the limit (parseRequest then refuses it). */
function boundedRequest(base64: string): Buffer {
  return Buffer.from(base64.slice(0, Math.ceil((MAX_REQUEST_BYTES + 1) / 3) * 4), 'base64');
}

export class IdentityController {
  readonly queue = new WorkQueue({ concurrency: 4, baseDelayMs: 200, maxDelayMs: 30_000 });
  private readonly csrs: Informer<CsrObject>;

  constructor(private readonly o: IdentityControllerOptions) {
    const touch = (c: CsrObject): void => {
      if (!decided(c)) this.queue.add(c.metadata.name);
    };
    this.csrs = new Informer<CsrObject>(
      httpSource(o.http, {
        path: CSR_PATH,
        ...(o.watchTimeoutSeconds === undefined
          ? {}
          : { watchTimeoutSeconds: o.watchTimeoutSeconds }),
      }),
      {
        onAdd: touch,
        onUpdate: (_, c) => {
          touch(c);
        },
      },
      {
        name: 'certificatesigningrequests',
        transform: dropManagedFields,
        onError: (error, attempt) => {
          o.log.warn({ attempt, ...errorFields(error) }, 'CSR watch failed; retrying');
        },
      },
    );
  }

  get synced(): boolean {
    return this.csrs.synced;
  }

  async start(): Promise<void> {
    this.csrs.start();
    await this.csrs.waitForSync();
    this.queue.start((name) => this.handle(name));
  }

  async stop(): Promise<void> {
    await this.queue.shutdown();
    await this.csrs.stop();
  }

  /** The message saying which CSR took this config's token, when one did. */
  private issuedBy(config: ConfigObject): { message: string | undefined; available: boolean } {
    const condition = config.status?.conditions?.find((c) => c.type === 'BootstrapTokenAvailable');
    const consumed = this.o.bootstrap.consumed.get(keyOf(config));
    // with kubelet bootstrapping the token outlives the agent's certificate: NodeIdentity says it
    const identity = config.status?.conditions?.find(
      (c) => c.type === 'NodeIdentity' && c.status === 'True' && c.reason === 'Issued',
    );
    const message =
      consumed?.message ??
      (condition?.status === 'False' && condition.reason === REASON_IDENTITY_ISSUED
        ? condition.message
        : identity?.message);
    return {
      message,
      available: consumed === undefined && condition?.status !== 'False' && !identity,
    };
  }

  private tokenMachine(id: string): TokenMachine | undefined {
    const config = this.o.bootstrap.configForToken(id);
    if (!config) return undefined;
    const { message, available } = this.issuedBy(config);
    const consumedBy = message === undefined ? undefined : CONSUMED_BY.exec(message)?.[1];
    return {
      config: keyOf(config),
      machine: machineOf(config),
      tokenAvailable: available,
      ...(consumedBy !== undefined ? { consumedBy } : {}),
    };
  }

  private kubeletMachine(config: ConfigObject): KubeletMachine {
    const key = keyOf(config);
    const kubelet = config.status?.conditions?.find(
      (c) => c.type === 'KubeletIdentity' && c.status === 'True',
    );
    const issuedBy = this.o.bootstrap.consumed.get(`${key}#kubelet`)?.message ?? kubelet?.message;
    const consumedBy = issuedBy === undefined ? undefined : CONSUMED_BY.exec(issuedBy)?.[1];
    return {
      config: key,
      machine: machineOf(config),
      kubeletBootstrap: kubeletBootstraps(config),
      kubeletDone: consumerDone(config, 'kubelet', this.o.bootstrap.consumed),
      ...(consumedBy !== undefined ? { consumedBy } : {}),
    };
  }

  decision(csr: CsrObject): AnyDecision {
    if (decided(csr)) return { action: 'ignore', why: 'already decided' };
    if (isKubeletClientRequest(csr)) {
      return decideKubelet(csr, parseRequest(boundedRequest(csr.spec.request)), {
        tokenMachine: (id) => {
          const config = this.o.bootstrap.configForToken(id);
          return config ? this.kubeletMachine(config) : undefined;
        },
        machineConfigs: (machine) =>
          this.o.bootstrap.configsForMachine(machine).map((c) => this.kubeletMachine(c)),
        maxExpirationSeconds: this.o.maxExpirationSeconds,
      });
    }
    return decide(csr, parseRequest(boundedRequest(csr.spec.request)), {
      tokenMachine: (id) => this.tokenMachine(id),
      machineConfigs: (machine) =>
        this.o.bootstrap.configsForMachine(machine).map((c) => ({
          config: keyOf(c),
          issued: this.issuedBy(c).message !== undefined,
        })),
      maxExpirationSeconds: this.o.maxExpirationSeconds,
    });
  }

  private configAt(key: string): ConfigObject | undefined {
    const [namespace = '', name = ''] = key.split('/');
    return this.o.bootstrap.config(namespace, name);
  }

  private async handle(name: string): Promise<HandlerResult | undefined> {
    const { log, metrics, writer, bootstrap } = this.o;
    const csr = this.csrs.get('', name);
    if (!csr) return undefined;
    const d = this.decision(csr);
    if (d.action === 'ignore') return undefined;
    const count = (resource: string, verb: string): void => {
      metrics.writes.inc({ resource, verb });
    };
    const configOf = (key: string | undefined, tokenId?: string): ConfigObject | undefined =>
      key === undefined
        ? undefined
        : ((tokenId !== undefined ? bootstrap.configForToken(tokenId) : undefined) ??
          this.configAt(key));
    try {
      if (d.action === 'deny') {
        await writer.decideCsr(csr, { type: 'Denied', reason: d.reason, message: d.message });
        count('certificatesigningrequests/approval', 'update');
        metrics.reconciles.inc({ result: 'identity-denied' });
        metrics.identityDenials.inc({ reason: d.reason });
        log.warn(
          { csr: name, config: d.config, reason: d.reason, message: d.message },
          'denied a certificate request',
        );
        const requester = csr.spec.username?.startsWith('system:bootstrap:')
          ? bootstrap.configForToken(csr.spec.username.slice('system:bootstrap:'.length))
          : undefined;
        const config = requester ?? configOf(d.config);
        if (config) {
          await bootstrap.event(config, {
            type: 'Warning',
            reason: 'IdentityDenied',
            message: `Certificate request ${name} denied (${d.reason}): ${d.message}`,
          });
          count('events', 'create');
        }
        return undefined;
      }
      const config = configOf(d.config, d.tokenId);
      if (!config) throw new Error(`OscarConfig ${d.config} is not in the cache`);
      if (d.kind === 'kubelet' || d.kind === 'kubeletRenewal') {
        await approveKubelet(csr, { ...d, kind: d.kind }, config, { writer, bootstrap, count });
        metrics.reconciles.inc({
          result: `identity-${d.kind === 'kubelet' ? 'kubelet-issued' : 'kubelet-renewed'}`,
        });
        log.info(
          { csr: name, machine: d.machine, kind: d.kind, config: keyOf(config) },
          'approved a kubelet certificate',
        );
        return undefined;
      }
      await approveAgent(csr, { ...d, kind: d.kind }, config, { writer, bootstrap, count });
      metrics.reconciles.inc({
        result: `identity-${d.kind === 'bootstrap' ? 'issued' : 'renewed'}`,
      });
      log.info(
        { csr: name, machine: d.machine, kind: d.kind, config: keyOf(config) },
        'approved a node identity',
      );
      return undefined;
    } catch (error) {
      metrics.reconciles.inc({ result: 'identity-error' });
      log.warn({ csr: name, ...errorFields(error) }, 'certificate request: will retry');
      throw error;
    }
  }
}
