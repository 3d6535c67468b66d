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
import type { Logger } from '../../log/logger.js';
import { keyOf, type Informer } from '../kube/informer.js';
import type { ControllerMetrics } from '../runtime/metrics.js';
import { ControllerRuntime, controllerQueue, RuntimeController } from '../runtime/controller.js';
import { timedHandle, type Reconciled } from '../runtime/handle.js';
import { watchInformer } from '../runtime/informers.js';
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
  type KubeletDecision,
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

function machineOf(config: ConfigObject): string {
  return machineOwner(config)?.name ?? config.metadata.name;
}

/** spec.request's bytes; an oversized one is cut at the limit (parseRequest then refuses it). */
function boundedRequest(base64: string): Buffer {
  return Buffer.from(base64.slice(0, Math.ceil((MAX_REQUEST_BYTES + 1) / 3) * 4), 'base64');
}

export class IdentityController extends RuntimeController {
  readonly queue = controllerQueue(
    { concurrency: 4, baseDelayMs: 200, maxDelayMs: 30_000 },
    undefined,
    undefined,
  );
  private readonly csrs: Informer<CsrObject>;
  protected readonly runtime: ControllerRuntime;

  constructor(private readonly o: IdentityControllerOptions) {
    super();
    const touch = (c: CsrObject): void => {
      if (!decided(c)) this.queue.add(c.metadata.name);
    };
    this.csrs = watchInformer<CsrObject>(
      {
        http: o.http,
        log: o.log,
        ...(o.watchTimeoutSeconds === undefined
          ? {}
          : { watchTimeoutSeconds: o.watchTimeoutSeconds }),
      },
      {
        name: 'certificatesigningrequests',
        source: { path: CSR_PATH },
        failed: 'CSR watch failed; retrying',
      },
      {
        onAdd: touch,
        onUpdate: (_, c) => {
          touch(c);
        },
      },
    );
    this.runtime = new ControllerRuntime({
      queue: this.queue,
      handle: timedHandle((name) => this.reconcile(name), {
        keyField: 'csr',
        reconciled: 'certificate request decided',
        failed: 'certificate request: will retry',
        log: o.log,
        queue: () => this.queue,
        count: (result) => {
          o.metrics.reconciles.inc({ result });
        },
        errorResult: () => 'identity-error',
      }),
      log: o.log,
      informers: () => [this.csrs],
    });
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
      uid: config.metadata.uid ?? '',
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
          uid: c.metadata.uid ?? '',
          issued: this.issuedBy(c).message !== undefined,
        })),
      maxExpirationSeconds: this.o.maxExpirationSeconds,
    });
  }

  private configAt(key: string): ConfigObject | undefined {
    const [namespace = '', name = ''] = key.split('/');
    return this.o.bootstrap.config(namespace, name);
  }

  /** Writes a refusal: the CSR's Denied condition, and a Warning Event on its config. */
  private async deny(
    csr: CsrObject,
    d: Extract<AnyDecision, { action: 'deny' }>,
  ): Promise<Reconciled> {
    const { writer, bootstrap, metrics } = this.o;
    const name = csr.metadata.name;
    await writer.decideCsr(csr, { type: 'Denied', reason: d.reason, message: d.message });
    metrics.writes.inc({ resource: 'certificatesigningrequests/approval', verb: 'update' });
    metrics.identityDenials.inc({ reason: d.reason });
    const requester = csr.spec.username?.startsWith('system:bootstrap:')
      ? bootstrap.configForToken(csr.spec.username.slice('system:bootstrap:'.length))
      : undefined;
    const config = requester ?? (d.config === undefined ? undefined : this.configAt(d.config));
    if (config) {
      await bootstrap.event(config, {
        type: 'Warning',
        reason: 'IdentityDenied',
        message: `Certificate request ${name} denied (${d.reason}): ${d.message}`,
      });
      metrics.writes.inc({ resource: 'events', verb: 'create' });
    }
    return {
      result: 'identity-denied',
      writes: config ? 2 : 1,
      level: 'warn',
      message: 'denied a certificate request',
      fields: { config: d.config, reason: d.reason, message: d.message },
    };
  }

  /** Decides one CSR and writes the decision; undefined: not oscar's, or decided already. */
  private async reconcile(name: string): Promise<Reconciled | undefined> {
    const { metrics, writer, bootstrap } = this.o;
    const csr = this.csrs.get('', name);
    if (!csr) return undefined;
    const d = this.decision(csr);
    if (d.action === 'ignore') return undefined;
    if (d.action === 'deny') return this.deny(csr, d);
    const count = (resource: string, verb: string): void => {
      metrics.writes.inc({ resource, verb });
    };
    const config =
      (d.tokenId !== undefined ? bootstrap.configForToken(d.tokenId) : undefined) ??
      this.configAt(d.config);
    if (!config) throw new Error(`OscarConfig ${d.config} is not in the cache`);
    const fields = { machine: d.machine, kind: d.kind, config: keyOf(config) };
    if (isKubeletApproval(d)) {
      await approveKubelet(csr, { ...d, kind: d.kind }, config, { writer, bootstrap, count });
      return {
        result: `identity-${d.kind === 'kubelet' ? 'kubelet-issued' : 'kubelet-renewed'}`,
        writes: 1,
        message: 'approved a kubelet certificate',
        fields,
      };
    }
    await approveAgent(csr, { ...d, kind: d.kind }, config, { writer, bootstrap, count });
    return {
      result: `identity-${d.kind === 'bootstrap' ? 'issued' : 'renewed'}`,
      writes: 1,
      message: 'approved a node identity',
      fields,
    };
  }
}

type Approval = Extract<AnyDecision, { action: 'approve' }>;

function isKubeletApproval(d: Approval): d is Extract<KubeletDecision, { action: 'approve' }> {
  return d.kind === 'kubelet' || d.kind === 'kubeletRenewal';
}
