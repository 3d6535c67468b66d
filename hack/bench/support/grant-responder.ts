/**
 * Simulated nodes' answers to their grants, for benches that need a rollout's reports without
 * agent processes: one watch of the bench's OperatingSystemConfigNodes (a label selector); each
 * new grant (a new metadata.generation carrying spec.revision) is answered as the grant-mode agent
 * answers it (agent/rollout/grant-admission.ts), the apply itself simulated as a fixed time:
 * - a grant without try mode (a joining node's first revision): Confirmed, `Applied`;
 * - a grant in try mode: Verifying (applied, soaking; the applied checksum in the same write),
 *   then after the grant's soakSeconds Confirmed, `Healthy`.
 * Reports are status merge patches, at most `inFlight` at a time (the API server's pace, as the
 * bench's other reports). A grant superseded before its answer goes out is not answered.
 */
import type { RevisionGrant, RevisionReport } from '../../../api/schema.js';
import { CONTENT_MERGE_PATCH, type KubeHttp } from '../../../kube/client.js';

const NODES = '/apis/oscar.dev/v1alpha1/operatingsystemconfignodes';

interface NodeEvent {
  type: string;
  object: {
    metadata: { name: string; generation?: number; resourceVersion?: string };
    spec?: { revision?: RevisionGrant };
  };
}

export interface GrantResponderOptions {
  http: KubeHttp;
  labelSelector: string;
  /** The simulated apply: grant seen → report. */
  applyMs: number;
  inFlight: number;
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

/** The node's status patch answering `grant` (generation `generation`) with `phase`. */
export function answerPatch(
  grant: RevisionGrant,
  generation: number,
  phase: 'Verifying' | 'Confirmed',
  previous: string | undefined,
  now: number,
): Record<string, unknown> {
  const tried = grant.try !== undefined;
  const revision: Omit<RevisionReport, 'deadline'> & { deadline?: string | null } = {
    observedGeneration: generation,
    number: grant.number,
    checksum: grant.checksum,
    phase,
    reason: phase === 'Verifying' ? 'Soaking' : tried ? 'Healthy' : 'Applied',
    message: phase === 'Verifying' ? 'simulated soak' : 'simulated',
    lastTransitionTime: rfc3339(now),
  };
  if (phase === 'Verifying') {
    const deadline = (grant.try?.deadlineSeconds ?? 0) + (grant.try?.soakSeconds ?? 0);
    revision.deadline = rfc3339(now + deadline * 1000);
    if (previous !== undefined) revision.previousChecksum = previous;
  } else {
    revision.deadline = null; // a merge patch: the Verifying report's deadline goes
  }
  const status: Record<string, unknown> = { revision };
  if (phase === 'Verifying' || !tried) {
    status.appliedChecksum = grant.checksum;
    status.desiredChecksum = grant.checksum;
    status.lastAppliedTime = rfc3339(now);
  }
  return { status };
}

export class GrantResponder {
  private readonly latest = new Map<string, number>();
  private readonly applied = new Map<string, string>();
  private readonly waiting: (() => void)[] = [];
  private running = 0;
  private readonly abort = new AbortController();
  private watching: Promise<void> | undefined;
  /** Reports answered by the API server, and when the last one was. */
  reports = 0;
  lastReportAt = 0;
  errors = 0;

  constructor(private readonly o: GrantResponderOptions) {}

  /** Starts watching from now (the nodes are the bench's, none exists yet or none is granted). */
  async start(): Promise<void> {
    const list = await this.o.http.request<{ metadata: { resourceVersion: string } }>(
      'GET',
      NODES,
      { query: { labelSelector: this.o.labelSelector, limit: 1 } },
    );
    this.watching = this.watch(list.metadata.resourceVersion);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.watching?.catch(() => undefined);
  }

  private async watch(from: string): Promise<void> {
    let rv = from;
    while (!this.abort.signal.aborted) {
      await this.o.http
        .stream(
          NODES,
          {
            query: {
              labelSelector: this.o.labelSelector,
              watch: true,
              resourceVersion: rv,
              allowWatchBookmarks: true,
            },
            signal: this.abort.signal,
          },
          (line) => {
            const event = JSON.parse(line) as NodeEvent;
            if (event.type === 'ERROR') throw new Error(`watch: ${line}`);
            rv = event.object.metadata.resourceVersion ?? rv;
            if (event.type === 'ADDED' || event.type === 'MODIFIED') this.seen(event.object);
          },
        )
        .catch((error: unknown) => {
          if (!this.abort.signal.aborted) throw error;
        });
    }
  }

  private seen(node: NodeEvent['object']): void {
    const grant = node.spec?.revision;
    const generation = node.metadata.generation ?? 0;
    const name = node.metadata.name;
    if (!grant || generation <= (this.latest.get(name) ?? 0)) return;
    this.latest.set(name, generation);
    setTimeout(() => void this.answer(name, grant, generation), this.o.applyMs);
  }

  private async answer(name: string, grant: RevisionGrant, generation: number): Promise<void> {
    const previous = this.applied.get(name);
    const first = grant.try ? 'Verifying' : 'Confirmed';
    if (!(await this.report(name, grant, generation, first, previous))) return;
    this.applied.set(name, grant.checksum);
    if (!grant.try) return;
    const soakMs = grant.try.soakSeconds * 1000;
    setTimeout(() => void this.report(name, grant, generation, 'Confirmed', previous), soakMs);
  }

  /** One report (retried as an agent retries), unless a newer grant superseded this one. */
  private async report(
    name: string,
    grant: RevisionGrant,
    generation: number,
    phase: 'Verifying' | 'Confirmed',
    previous: string | undefined,
  ): Promise<boolean> {
    for (;;) {
      if (this.latest.get(name) !== generation || this.abort.signal.aborted) return false;
      await this.slot();
      try {
        await this.o.http.request('PATCH', `${NODES}/${name}/status`, {
          contentType: CONTENT_MERGE_PATCH,
          body: answerPatch(grant, generation, phase, previous, Date.now()),
        });
        this.reports++;
        this.lastReportAt = performance.now();
        return true;
      } catch {
        this.errors++;
      } finally {
        this.release();
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  /** One of `inFlight` slots; a released slot passes straight to the next waiter. */
  private async slot(): Promise<void> {
    if (this.running < this.o.inFlight) {
      this.running++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}
