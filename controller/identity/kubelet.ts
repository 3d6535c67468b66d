/**
 * The approver's decision on a kubelet client certificate request (docs/identity.md, "kubelet"):
 * pure, so every refusal is a unit test. kubeadm's and Gardener's clusters let any holder of a
 * bootstrap token get a kubelet certificate for any node name (the generic nodeclient
 * auto-approval); oscar approves one only when it is exactly the machine's own:
 *
 * - signer kubernetes.io/kube-apiserver-client-kubelet;
 * - requested by the machine's bootstrap token (its OscarConfig sets spec.kubeletBootstrap), or
 *   for rotation by that node's own certificate (user system:node:<machine>, group system:nodes);
 * - the subject is exactly CN=system:node:<machine>, O=system:nodes — the machine the token was
 *   issued for, or the requester itself;
 * - no attributes (no extension request: no SANs);
 * - usages within {digital signature, key encipherment, client auth}, client auth among them;
 * - expirationSeconds, when kubelet sets it, at most the cap (kubelet normally leaves it unset:
 *   the signer's --cluster-signing-duration applies, and kubelet rotates before it ends);
 * - with the token: only while kubelet's use of it is open (one kubelet certificate per token; a
 *   retry of the CSR that used it may finish).
 *
 * Requests by anything else (another cluster's kubelets, kubeadm's own tokens) are ignored, never
 * approved. Serving certificates (kubernetes.io/kubelet-serving) are not decided here: their SANs
 * are addresses the node reports about itself, which oscar cannot check (docs/identity.md).
 */
import { BOOTSTRAP_TOKEN_GROUP } from '../../api/bootstrap/constants.js';
import type { CsrObject, Decision } from './decide.js';
import {
  OID_COMMON_NAME,
  OID_ORGANIZATION,
  signatureRefusal,
  type ParsedRequest,
} from './request.js';

export const KUBELET_CLIENT_SIGNER = 'kubernetes.io/kube-apiserver-client-kubelet';
export const KUBELET_USER_PREFIX = 'system:node:';
export const KUBELET_NODES_GROUP = 'system:nodes';
export const KUBELET_ALLOWED_USAGES: readonly string[] = [
  'digital signature',
  'key encipherment',
  'client auth',
];

const BOOTSTRAP_USER_PREFIX = 'system:bootstrap:';

/** What the approver knows of the config behind a token or a machine name. */
export interface KubeletMachine {
  /** The OscarConfig (namespace/name). */
  config: string;
  machine: string;
  /** spec.kubeletBootstrap: the machine's kubelet may use the token. */
  kubeletBootstrap: boolean;
  /** kubelet already got its certificate with the token. */
  kubeletDone: boolean;
  /** The CSR that used the token for kubelet, when one did (its retry may finish). */
  consumedBy?: string;
}

export interface KubeletContext {
  tokenMachine(id: string): KubeletMachine | undefined;
  /** The configs that name a machine (one normally; two: the name is taken twice). */
  machineConfigs(machine: string): KubeletMachine[];
  maxExpirationSeconds: number;
}

export type KubeletDecision =
  | { action: 'ignore'; why: string }
  | { action: 'deny'; reason: string; message: string; config?: string }
  | {
      action: 'approve';
      kind: 'kubelet' | 'kubeletRenewal';
      machine: string;
      config: string;
      /** Set for a first certificate: the token whose kubelet use this closes. */
      tokenId?: string;
    };

/** Only the kubelet client signer is decided here. */
export function isKubeletClientRequest(csr: CsrObject): boolean {
  return csr.spec.signerName === KUBELET_CLIENT_SIGNER;
}

type Found =
  | { kind: 'bootstrap'; target: KubeletMachine; tokenId: string }
  | { kind: 'node'; target: KubeletMachine }
  | { ignore: string }
  | { deny: { reason: string; message: string; config?: string } };

function byToken(csr: CsrObject, tokenId: string, ctx: KubeletContext): Found {
  const target = ctx.tokenMachine(tokenId);
  if (!target) {
    return {
      ignore: `bootstrap token ${tokenId} is not the current token of an OscarConfig this controller watches`,
    };
  }
  const deny = (reason: string, message: string): Found => ({
    deny: { reason, message, config: target.config },
  });
  if (!target.kubeletBootstrap) {
    return deny(
      'KubeletBootstrapOff',
      `bootstrap token ${tokenId} of machine ${target.machine}: its OscarConfig ${target.config} does not set spec.kubeletBootstrap, so its token gets no kubelet certificate`,
    );
  }
  const others = ctx.machineConfigs(target.machine).filter((m) => m.config !== target.config);
  if (others.length > 0) {
    return deny(
      'MachineNameTaken',
      `machine ${target.machine} is also named by OscarConfig ${others.map((m) => m.config).join(', ')}: node names are cluster-wide; rename one machine`,
    );
  }
  if (target.kubeletDone && target.consumedBy !== csr.metadata.name) {
    return deny(
      'TokenAlreadyUsed',
      `bootstrap token ${tokenId} of machine ${target.machine} already gave kubelet its certificate${target.consumedBy ? ` (CSR ${target.consumedBy})` : ''}: renewals are requested with the node's certificate`,
    );
  }
  return { kind: 'bootstrap', target, tokenId };
}

function byNode(machine: string, ctx: KubeletContext): Found {
  const configs = ctx.machineConfigs(machine);
  const [target] = configs;
  if (!target) {
    return { ignore: `no OscarConfig this controller watches names machine ${machine}` };
  }
  if (configs.length > 1) {
    return {
      deny: {
        reason: 'MachineNameTaken',
        message: `machine ${machine} is named by OscarConfigs ${configs.map((m) => m.config).join(', ')}: node names are cluster-wide; rename one machine`,
      },
    };
  }
  if (!target.kubeletBootstrap) {
    return { ignore: `OscarConfig ${target.config} does not set spec.kubeletBootstrap` };
  }
  return { kind: 'node', target };
}

function requester(csr: CsrObject, ctx: KubeletContext): Found {
  const user = csr.spec.username ?? '';
  const groups = csr.spec.groups ?? [];
  if (user.startsWith(BOOTSTRAP_USER_PREFIX) && groups.includes(BOOTSTRAP_TOKEN_GROUP)) {
    return byToken(csr, user.slice(BOOTSTRAP_USER_PREFIX.length), ctx);
  }
  if (
    user.startsWith(KUBELET_USER_PREFIX) &&
    user.length > KUBELET_USER_PREFIX.length &&
    groups.includes(KUBELET_NODES_GROUP)
  ) {
    return byNode(user.slice(KUBELET_USER_PREFIX.length), ctx);
  }
  return { ignore: 'not requested by an oscar machine token or a node oscar bootstrapped' };
}

/** Why the subject is not exactly CN=system:node:<machine>, O=system:nodes; undefined when it is. */
export function kubeletSubjectProblem(
  subject: ParsedRequest['subject'],
  machine: string,
): string | undefined {
  const cn = `${KUBELET_USER_PREFIX}${machine}`;
  const names: Record<string, string> = { [OID_COMMON_NAME]: 'CN', [OID_ORGANIZATION]: 'O' };
  const got = subject.map((a) => `${a.type}=${a.value}`);
  const want = [`${OID_COMMON_NAME}=${cn}`, `${OID_ORGANIZATION}=${KUBELET_NODES_GROUP}`];
  if (got.length === 2 && want.every((w) => got.includes(w))) return undefined;
  const asked = subject.map((a) => `${names[a.type] ?? a.type}=${a.value}`).join(', ');
  return `the subject must be exactly CN=${cn}, O=${KUBELET_NODES_GROUP}; the request asks for ${asked || '(empty)'}`;
}

/** The request's own checks, once the machine is known. */
function requestProblem(
  csr: CsrObject,
  parsed: ParsedRequest | Error,
  machine: string,
  maxSeconds: number,
): { reason: string; message: string } | undefined {
  if (parsed instanceof Error)
    return { reason: 'InvalidRequest', message: `spec.request: ${parsed.message}` };
  const signature = signatureRefusal(parsed);
  if (signature !== undefined) return signature;
  const subject = kubeletSubjectProblem(parsed.subject, machine);
  if (subject !== undefined) return { reason: 'WrongSubject', message: subject };
  if (parsed.attributes.length > 0) {
    return {
      reason: 'AttributesNotAllowed',
      message: `spec.request carries attributes (${parsed.attributes.join(', ')}): a kubelet client certificate has no extensions, no subject alternative names`,
    };
  }
  const usages = csr.spec.usages ?? [];
  if (usages.some((u) => !KUBELET_ALLOWED_USAGES.includes(u)) || !usages.includes('client auth')) {
    return {
      reason: 'WrongUsages',
      message: `spec.usages must be within ${KUBELET_ALLOWED_USAGES.join(', ')} and include client auth; got ${usages.join(', ') || '(none)'}`,
    };
  }
  const seconds = csr.spec.expirationSeconds;
  if (seconds !== undefined && seconds > maxSeconds) {
    return {
      reason: 'LifetimeTooLong',
      message: `spec.expirationSeconds is ${String(seconds)}; at most ${String(maxSeconds)}`,
    };
  }
  return undefined;
}

export function decideKubelet(
  csr: CsrObject,
  parsed: ParsedRequest | Error,
  ctx: KubeletContext,
): KubeletDecision {
  const found = requester(csr, ctx);
  if ('ignore' in found) return { action: 'ignore', why: found.ignore };
  if ('deny' in found) return { action: 'deny', ...found.deny };
  const { machine, config } = found.target;
  const problem = requestProblem(csr, parsed, machine, ctx.maxExpirationSeconds);
  if (problem) {
    return {
      action: 'deny',
      reason: problem.reason,
      message:
        found.kind === 'bootstrap'
          ? `kubelet certificate with the bootstrap token of machine ${machine}: ${problem.message}`
          : `kubelet certificate renewal by system:node:${machine}: ${problem.message}`,
      config,
    };
  }
  return {
    action: 'approve',
    kind: found.kind === 'bootstrap' ? 'kubelet' : 'kubeletRenewal',
    machine,
    config,
    ...(found.kind === 'bootstrap' ? { tokenId: found.tokenId } : {}),
  };
}

/** The approver's decision type, with kubelet's approvals. */
export type AnyDecision = Decision | KubeletDecision;
