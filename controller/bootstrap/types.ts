/** The slices of the objects the bootstrap controller reads. */
import type { OscarConfigSpec, OscarConfigStatus } from '../../api/bootstrap/schema.js';
import type { KubeObject } from '../kube/types.js';

export interface ConfigObject extends KubeObject {
  spec: OscarConfigSpec;
  status?: OscarConfigStatus;
}

/** A Cluster API Machine (v1beta2), slimmed to what bootstrap needs. */
export interface MachineObject extends KubeObject {
  spec?: {
    clusterName?: string;
    bootstrap?: { configRef?: { apiGroup?: string; kind?: string; name?: string } };
  };
  status?: { nodeRef?: { name?: string } };
}

/** A Cluster API Cluster (v1beta2), slimmed to its pause switch. */
export interface ClusterObject extends KubeObject {
  spec?: { paused?: boolean };
}

/** Keeps only what bootstrap reads of a Machine: its cache then holds no provider specs. */
export function slimMachine(obj: unknown): void {
  const m = obj as MachineObject & {
    spec?: Record<string, unknown>;
    status?: Record<string, unknown>;
  };
  delete (m.metadata as { managedFields?: unknown }).managedFields;
  if (m.spec) {
    const { clusterName, bootstrap } = m.spec;
    m.spec = { clusterName, bootstrap };
  }
  if (m.status) m.status = { nodeRef: m.status.nodeRef };
}

export function slimCluster(obj: unknown): void {
  const c = obj as ClusterObject & { spec?: Record<string, unknown>; status?: unknown };
  delete (c.metadata as { managedFields?: unknown }).managedFields;
  if (c.spec) c.spec = { paused: c.spec.paused };
  delete c.status;
}
