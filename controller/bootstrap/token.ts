/**
 * The machine's bootstrap credential: a bootstrap token (a Secret of type
 * bootstrap.kubernetes.io/token in kube-system) that authenticates as system:bootstrap:<id> in
 * the group system:bootstrappers:oscar, valid for a short TTL and refreshed while the machine has
 * not joined.
 *
 * Binding, for an approver to check (the next issue approves the agent's CSR): the token id is
 * derived from the config's uid (tokenIdFor), and the token Secret carries the config's uid as a
 * label and its namespace/name and the machine's as annotations. Only the controller writes
 * Secrets in kube-system, so those can be trusted.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  ANNOTATION_CONFIG,
  ANNOTATION_MACHINE,
  BOOTSTRAP_TOKEN_GROUP,
  BOOTSTRAP_TOKEN_NAMESPACE,
  BOOTSTRAP_TOKEN_TYPE,
  LABEL_CONFIG_UID,
} from '../../api/bootstrap/constants.js';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/**
 * The token id for a config: 6 characters of [a-z0-9] from sha256(uid/attempt). attempt moves
 * only when another token already holds the id (one in ~2 billion per pair).
 */
export function tokenIdFor(uid: string, attempt = 0): string {
  const digest = createHash('sha256')
    .update(`${uid}/${String(attempt)}`)
    .digest();
  let id = '';
  for (let i = 0; id.length < 6; i++) id += ALPHABET.charAt((digest[i] ?? 0) % 36);
  return id;
}

/** 16 random characters of [a-z0-9], without modulo bias. */
export function newTokenSecret(random: (n: number) => Buffer = randomBytes): string {
  let out = '';
  while (out.length < 16) {
    for (const b of random(32)) {
      if (b < 252 && out.length < 16) out += ALPHABET.charAt(b % 36);
    }
  }
  return out;
}

export function tokenSecretName(id: string): string {
  return `bootstrap-token-${id}`;
}

/** RFC 3339 without fractions, as the token authenticator and cleaner parse it. */
export function expirationText(at: Date): string {
  return at.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export interface TokenBinding {
  configNamespace: string;
  configName: string;
  configUid: string;
  machineName: string;
}

function b64(s: string): string {
  return Buffer.from(s, 'utf8').toString('base64');
}

/**
 * The token Secret's server-side apply body. `signing` (the provision OSC hands the token to
 * `kubeadm join`, through {{ bootstrap.token }}) adds usage-bootstrap-signing: kube-controller-
 * manager's bootstrap-signer then signs kube-public/cluster-info for this token, which kubeadm's
 * discovery verifies. Only then: every signing token costs the signer a cluster-info write when
 * it comes and when it goes, and publishes an HMAC keyed by the token's secret.
 */
export function tokenSecretBody(
  token: { id: string; secret: string },
  expiresAt: Date,
  binding: TokenBinding,
  options: { signing?: boolean } = {},
): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: BOOTSTRAP_TOKEN_TYPE,
    metadata: {
      name: tokenSecretName(token.id),
      namespace: BOOTSTRAP_TOKEN_NAMESPACE,
      labels: { [LABEL_CONFIG_UID]: binding.configUid },
      annotations: {
        [ANNOTATION_CONFIG]: `${binding.configNamespace}/${binding.configName}`,
        [ANNOTATION_MACHINE]: `${binding.configNamespace}/${binding.machineName}`,
      },
    },
    data: {
      'token-id': b64(token.id),
      'token-secret': b64(token.secret),
      expiration: b64(expirationText(expiresAt)),
      'usage-bootstrap-authentication': b64('true'),
      ...(options.signing === true ? { 'usage-bootstrap-signing': b64('true') } : {}),
      'auth-extra-groups': b64(BOOTSTRAP_TOKEN_GROUP),
      description: b64(
        `oscar bootstrap token of machine ${binding.configNamespace}/${binding.machineName}`,
      ),
    },
  };
}

/**
 * When to refresh a token that expires at `expiresAt`: once less than half its TTL is left, so
 * a controller that misses one refresh (restart, API server down) still has half a TTL to retry.
 */
export function refreshDueAt(expiresAt: Date, ttlMs: number): Date {
  return new Date(expiresAt.getTime() - ttlMs / 2);
}
