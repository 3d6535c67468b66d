/**
 * The per-machine bootstrap API (group bootstrap.oscar.dev): names, labels and limits, without the
 * schema library, so the controller's hot paths and the CLI's help do not load typebox.
 */
export const BOOTSTRAP_GROUP = 'bootstrap.oscar.dev';
export const BOOTSTRAP_VERSION = 'v1alpha1';
export const BOOTSTRAP_API_VERSION = `${BOOTSTRAP_GROUP}/${BOOTSTRAP_VERSION}`;
export const OSCAR_CONFIG_KIND = 'OscarConfig';
export const OSCAR_CONFIG_TEMPLATE_KIND = 'OscarConfigTemplate';
export const OSCAR_CONFIG_RESOURCE = 'oscarconfigs';
export const OSCAR_CONFIG_TEMPLATE_RESOURCE = 'oscarconfigtemplates';

/** Cluster API finds a provider's CRD version for its contract through this label. */
export const CAPI_CONTRACT_LABEL = 'cluster.x-k8s.io/v1beta2';
export const CAPI_GROUP = 'cluster.x-k8s.io';
export const CAPI_VERSION = 'v1beta2';
export const CAPI_CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
export const CAPI_PAUSED_ANNOTATION = 'cluster.x-k8s.io/paused';

/** Labels and annotations oscar puts on what it creates for a config. */
export const LABEL_CONFIG_UID = `${BOOTSTRAP_GROUP}/config-uid`;
export const LABEL_CONFIG_NAME = `${BOOTSTRAP_GROUP}/config`;
export const ANNOTATION_CONFIG = `${BOOTSTRAP_GROUP}/config`;
export const ANNOTATION_MACHINE = `${BOOTSTRAP_GROUP}/machine`;
export const ANNOTATION_TOKEN_ID = `${BOOTSTRAP_GROUP}/token-id`;

/** Bootstrap tokens authenticate as system:bootstrap:<id> in these groups (RBAC binds the group). */
export const BOOTSTRAP_TOKEN_GROUP = 'system:bootstrappers:oscar';
export const BOOTSTRAP_TOKEN_NAMESPACE = 'kube-system';
export const BOOTSTRAP_TOKEN_TYPE = 'bootstrap.kubernetes.io/token';

export const BOOTSTRAP_LIMITS = {
  values: 64,
  valueKeyLength: 63,
  valueBytes: 4096,
  urlLength: 2048,
} as const;

/** A values key: what `{{ values.KEY }}` can name. */
export const VALUE_KEY_PATTERN = '^[A-Za-z_][A-Za-z0-9_-]*$';
