/**
 * How a controller makes its informers: one list+watch per resource and scope over HTTP, with
 * managedFields dropped (or the controller's own slimming), the watch timeout of the process and
 * list/watch failures counted and logged alike in every controller.
 */
import type { KubeHttp } from '../../kube/client.js';
import { errorFields, type Logger } from '../../log/logger.js';
import type { Clock } from '../kube/clock.js';
import {
  dropManagedFields,
  httpSource,
  Informer,
  type HttpSourceOptions,
  type InformerHandlers,
} from '../kube/informer.js';
import type { KubeObject } from '../kube/types.js';
import type { ControllerMetrics } from './metrics.js';

/** What every informer of a controller shares. */
export interface InformerContext {
  http: KubeHttp;
  log: Logger;
  /** Counts list/watch failures (oscar_controller_watch_errors_total); none: only logged. */
  metrics?: ControllerMetrics;
  clock?: Clock;
  /** Server-side watch timeout (seconds); short values exercise reconnects in tests. */
  watchTimeoutSeconds?: number;
}

export interface InformerSpec {
  /** For logs: "secrets(ns-a, owned)". */
  name: string;
  /** The metric's informer label (default: name) and namespace label ("" for all). */
  metricName?: string;
  namespace?: string;
  /** The collection and how to list it; the watch timeout comes from the context. */
  source: Omit<HttpSourceOptions, 'watchTimeoutSeconds'>;
  /** Applied to every object before it is cached (default: drop managedFields). */
  transform?: (obj: unknown) => void;
  /** The log line of a failed list/watch. */
  failed?: string;
}

export function watchInformer<T extends KubeObject>(
  ctx: InformerContext,
  spec: InformerSpec,
  handlers: InformerHandlers<T>,
): Informer<T> {
  const { log, metrics } = ctx;
  const timeout =
    ctx.watchTimeoutSeconds === undefined ? {} : { watchTimeoutSeconds: ctx.watchTimeoutSeconds };
  return new Informer<T>(httpSource(ctx.http, { ...spec.source, ...timeout }), handlers, {
    name: spec.name,
    transform: spec.transform ?? dropManagedFields,
    ...(ctx.clock ? { clock: ctx.clock } : {}),
    onError: (error: unknown, attempt: number) => {
      metrics?.watchErrors.inc({
        informer: spec.metricName ?? spec.name,
        namespace: spec.namespace ?? '',
      });
      log.warn(
        { informer: spec.name, attempt, ...errorFields(error) },
        spec.failed ?? 'list/watch failed; retrying',
      );
    },
  });
}
