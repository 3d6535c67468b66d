/** The slices of Kubernetes object shapes the controller reads and writes. */
import type { OperatingSystemConfigSpec, OperatingSystemConfigStatus } from '../../api/schema.js';

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  deletionTimestamp?: string;
  creationTimestamp?: string;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export interface OscObject extends KubeObject {
  spec: OperatingSystemConfigSpec;
  status?: OperatingSystemConfigStatus;
}

/** A Secret or ConfigMap with its data (base64 for Secrets, text for ConfigMaps). */
export interface DataObject extends KubeObject {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
  type?: string;
}
