/**
 * The controllers of one leader term, said once: which run, what each shares with the others,
 * and the order the manager starts them in — the OSC controller first (the others read its
 * caches), then the rollout controller and the bootstrap controller, then the identity approver
 * (it reads the bootstrap controller's caches); stopped in reverse.
 */
import { DEFAULT_MAX_CERTIFICATE_SECONDS } from '../api/identity.js';
import type { KubeHttp } from '../kube/client.js';
import type { Logger } from '../log/logger.js';
import type { RendererRegistry } from '../renderers/registry.js';
import { BootstrapController } from './bootstrap/controller.js';
import type { BootstrapSettings } from './bootstrap/reconcile.js';
import { HttpBootstrapWriter } from './bootstrap/writer.js';
import {
  DEFAULT_IDENTITY_WAIT_MS,
  DEFAULT_TOKEN_TTL_MS,
  type BootstrapConfig,
  type ControllerConfig,
} from './config.js';
import { HttpNodeDrainer } from './drain/drainer.js';
import { IdentityController } from './identity/controller.js';
import { HttpIdentityWriter } from './identity/writer.js';
import { OscController } from './osc/controller.js';
import type { Pipeline } from './osc/pipeline.js';
import type { HttpWriter } from './osc/writer.js';
import { RolloutController } from './rollout/controller.js';
import { HttpRolloutWriter, type RolloutRequests } from './rollout/writer.js';
import { Manager } from './runtime/manager.js';
import type { ControllerMetrics } from './runtime/metrics.js';

/** What every controller of the process shares. */
export interface TermContext {
  config: ControllerConfig;
  http: KubeHttp;
  /** This replica's name: the field manager of its writes. */
  identity: string;
  writer: HttpWriter;
  registry: RendererRegistry;
  pipeline: Pipeline;
  /** The API server machines reach; undefined: per-machine bootstrap is off. */
  apiServer: BootstrapSettings['apiServer'] | undefined;
  log: Logger;
  metrics: ControllerMetrics;
}

/** The controllers of a term, in start order, and the one whose caches the others read. */
export interface Term {
  manager: Manager;
  osc: OscController;
}

/** The options every controller takes alike. */
function common(ctx: TermContext) {
  const { config, log, metrics } = ctx;
  return {
    http: ctx.http,
    namespaces: config.namespaces,
    log,
    metrics,
    queue: { concurrency: config.concurrency ?? 16 },
    ...(config.watchTimeoutSeconds === undefined
      ? {}
      : { watchTimeoutSeconds: config.watchTimeoutSeconds }),
  };
}

/** The rollout controller's writes, counted by resource and verb (oscar_controller_api_writes_total). */
function countedRolloutWriter(inner: RolloutRequests, metrics: ControllerMetrics): RolloutRequests {
  const count = (resource: string, verb: string): void => {
    metrics.writes.inc({ resource, verb });
  };
  return {
    readSecret: (namespace, name) => inner.readSecret(namespace, name),
    applyRevision: (body) => {
      count('secrets', 'apply');
      return inner.applyRevision(body);
    },
    grant: (node, grant) => {
      count('operatingsystemconfignodes', 'patch');
      return inner.grant(node, grant);
    },
    // status.rollout: through the OSC controller's status writer, counted there
  };
}

/** OscarConfigs → user data and tokens; it reads the OSC controller's caches through `osc()`. */
function bootstrapController(
  ctx: TermContext,
  apiServer: BootstrapSettings['apiServer'],
  osc: () => OscController | undefined,
): BootstrapController {
  const bootstrap: BootstrapConfig = ctx.config.bootstrap ?? { enabled: true };
  return new BootstrapController({
    ...common(ctx),
    writer: new HttpBootstrapWriter(ctx.http, ctx.identity),
    shared: {
      osc: (ns, name) => osc()?.osc(ns, name),
      references: (ns, spec) =>
        osc()?.references(ns, spec) ?? { secrets: new Map(), configMaps: new Map() },
      loadReferences: async (ns, spec) => {
        await osc()?.loadReferences(ns, spec);
      },
      nodeReported: (name, uid) => osc()?.nodeReported(name, uid) ?? false,
      nodeConfigUid: (name) => osc()?.nodeConfigUid(name),
    },
    settings: {
      registry: ctx.registry,
      apiServer,
      agent: {
        ...(bootstrap.agentUrl ? { url: bootstrap.agentUrl } : {}),
        ...(bootstrap.agentSha256 ? { sha256: bootstrap.agentSha256 } : {}),
      },
      ...(bootstrap.clusterName ? { clusterName: bootstrap.clusterName } : {}),
      tokenTtlMs: bootstrap.tokenTtlMs ?? DEFAULT_TOKEN_TTL_MS,
      identityWaitMs: bootstrap.identityWaitMs ?? DEFAULT_IDENTITY_WAIT_MS,
    },
  });
}

/** The identity approver: it reads the bootstrap controller's caches (which token is whose). */
function identityController(ctx: TermContext, b: BootstrapController): IdentityController {
  const { config } = ctx;
  return new IdentityController({
    http: ctx.http,
    writer: new HttpIdentityWriter(ctx.http),
    bootstrap: b,
    maxExpirationSeconds:
      config.bootstrap?.nodeCertificateMaxSeconds ?? DEFAULT_MAX_CERTIFICATE_SECONDS,
    log: ctx.log,
    metrics: ctx.metrics,
    ...(config.watchTimeoutSeconds === undefined
      ? {}
      : { watchTimeoutSeconds: config.watchTimeoutSeconds }),
  });
}

/** OSCs → Secrets and status; it tells the bootstrap controller of the OSCs and nodes it sees. */
function oscController(ctx: TermContext, b: BootstrapController | undefined): OscController {
  const { config } = ctx;
  return new OscController({
    ...common(ctx),
    // The owner references' garbage collection deletes an OSC's Secrets; the finalizer only
    // adds a write per new OSC (and one at deletion), so it is opt-in (docs/controller.md).
    ...(config.oscFinalizer === true ? {} : { finalizer: false }),
    ...(config.oscRenderedEvents === true ? { renderedEvents: true } : {}),
    ...(b
      ? {
          listeners: {
            osc: (ns: string, name: string) => {
              b.oscChanged(ns, name);
            },
            node: (name: string) => {
              b.nodeChanged(name);
            },
          },
        }
      : {}),
    writer: ctx.writer,
    pipeline: ctx.pipeline,
  });
}

/** Rollouts: it shares the OSC controller's informers. */
function rolloutController(
  ctx: TermContext,
  c: OscController,
  b: BootstrapController | undefined,
): RolloutController {
  const { metrics } = ctx;
  return new RolloutController({
    osc: c,
    issuedNamespaces: (node) => b?.issuedNamespaces(node) ?? [],
    writer: countedRolloutWriter(new HttpRolloutWriter(ctx.http), metrics),
    // Drain- and Reboot-level revisions are drained through the Eviction API before the grant
    drainer: new HttpNodeDrainer(ctx.http),
    event: (osc, e) => ctx.writer.event(osc, e),
    log: ctx.log,
    onReconcile: (result) => {
      metrics.rolloutReconciles.inc({ result });
    },
  });
}

/** The controllers of one leader term, in the order the manager starts them. */
export function controllersOfTerm(ctx: TermContext): Term {
  // The bootstrap controller and the OSC controller each hold the other (caches one way,
  // listeners the other): the bootstrap controller reads the OSC controller through a box.
  const box: { osc?: OscController } = {};
  const b = ctx.apiServer ? bootstrapController(ctx, ctx.apiServer, () => box.osc) : undefined;
  const c = oscController(ctx, b);
  box.osc = c;
  // The scrape-time gauges (paused rollouts, configs not requesting their identity) read these caches.
  ctx.metrics.sources.oscs = () => c.informers.osc.flatMap((i) => i.list());
  ctx.metrics.sources.configs = () => b?.allConfigs() ?? [];
  const parts = [c, rolloutController(ctx, c, b), ...(b ? [b, identityController(ctx, b)] : [])];
  return { manager: new Manager(parts), osc: c };
}
