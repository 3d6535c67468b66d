/**
 * The approver's decision on one CertificateSigningRequest (docs/identity.md): pure, so every
 * refusal is a unit test. oscar decides only requests that come from its own identities — a
 * machine's bootstrap token (group system:bootstrappers:oscar) or a node's certificate (group
 * oscar:nodes) — and ignores every other CSR in the cluster. Its own it approves only when exact:
 *
 * - signer kubernetes.io/kube-apiserver-client;
 * - the subject is exactly CN=oscar:node:<machine>, O=oscar:nodes, O=oscar:config:<uid>, where
 *   the machine and the config UID are those the bootstrap token was issued for (first identity),
 *   or the requester's own (renewal: the UID must be that of the live config holding the name);
 * - no attributes (so no extension request: no SANs);
 * - usages ⊆ {digital signature, key encipherment, client auth}, client auth among them;
 * - expirationSeconds given and at most the cap;
 * - a first identity only while the machine's token is unused (one identity per token).
 *
 * A token or a renewing machine that no config of this controller names is left alone (never
 * approved): it may be another oscar controller's, one per set of namespaces.
 *
 * kube-controller-manager signs whatever is approved for this signer: this is the boundary.
 */
import {
  ALLOWED_USAGES,
  NODE_SIGNER,
  configGroup,
  configUidsOf,
  NODES_GROUP,
  machineOfUser,
  nodeUser,
} from '../../api/identity.js';
import { BOOTSTRAP_TOKEN_GROUP } from '../../api/bootstrap/constants.js';
import {
  OID_COMMON_NAME,
  OID_ORGANIZATION,
  signatureRefusal,
  type ParsedRequest,
} from './request.js';

export interface CsrObject {
  metadata: { name: string; uid?: string; resourceVersion?: string };
  spec: {
    request: string;
    signerName: string;
    expirationSeconds?: number;
    usages?: string[];
    username?: string;
    groups?: string[];
  };
  status?: { conditions?: { type: string; status?: string }[]; certificate?: string };
}

/** The machine a bootstrap token was issued for, as its OscarConfig says. */
export interface TokenMachine {
  /** The OscarConfig (namespace/name). */
  config: string;
  /** The config's metadata.uid: the identity it issues is bound to it. */
  uid: string;
  machine: string;
  /** The token is still unused (BootstrapTokenAvailable is not False). */
  tokenAvailable: boolean;
  /** The CSR that consumed it, when one did (a retry of that approval is still allowed). */
  consumedBy?: string;
}

export interface MachineConfig {
  /** The OscarConfig (namespace/name). */
  config: string;
  uid: string;
  issued: boolean;
}

export interface DecideContext {
  /** The machine a token id belongs to, if oscar issued it. */
  tokenMachine(id: string): TokenMachine | undefined;
  /**
   * The live OscarConfigs that name a machine: one normally; none once it is deleted (a deleted
   * machine renews nothing); two when configs in two namespaces name the same machine (its user,
   * oscar:node:<machine>, would be both). `issued`: this config's token was traded for the
   * machine's identity — that config holds the name, and a collision never takes it away.
   */
  machineConfigs(machine: string): MachineConfig[];
  maxExpirationSeconds: number;
}

export type Decision =
  | { action: 'ignore'; why: string }
  | { action: 'deny'; reason: string; message: string; config?: string }
  | {
      action: 'approve';
      kind: 'bootstrap' | 'renewal';
      machine: string;
      config: string;
      /** The issuing config's UID (the certificate's second organisation). */
      uid: string;
      /** Set for a first identity: the token to consume. */
      tokenId?: string;
    };

const BOOTSTRAP_USER_PREFIX = 'system:bootstrap:';

export function decided(csr: CsrObject): boolean {
  return (csr.status?.conditions ?? []).some((c) =>
    ['Approved', 'Denied', 'Failed'].includes(c.type),
  );
}

type Requester =
  | { kind: 'bootstrap'; tokenId: string }
  | { kind: 'node'; machine: string; uids: string[] }
  | undefined;

function requesterOf(csr: CsrObject): Requester {
  const user = csr.spec.username ?? '';
  const groups = csr.spec.groups ?? [];
  if (user.startsWith(BOOTSTRAP_USER_PREFIX) && groups.includes(BOOTSTRAP_TOKEN_GROUP)) {
    return { kind: 'bootstrap', tokenId: user.slice(BOOTSTRAP_USER_PREFIX.length) };
  }
  const machine = machineOfUser(user);
  if (machine !== undefined && groups.includes(NODES_GROUP)) {
    return { kind: 'node', machine, uids: configUidsOf(groups) };
  }
  return undefined;
}

function describe(subject: ParsedRequest['subject']): string {
  const names: Record<string, string> = { [OID_COMMON_NAME]: 'CN', [OID_ORGANIZATION]: 'O' };
  return subject.map((a) => `${names[a.type] ?? a.type}=${a.value}`).join(', ') || '(empty)';
}

/**
 * Why the subject is not exactly CN=oscar:node:<machine>, O=oscar:nodes, O=oscar:config:<uid>;
 * undefined when it is.
 */
export function subjectProblem(
  subject: ParsedRequest['subject'],
  machine: string,
  uid: string,
): string | undefined {
  const want = [
    `${OID_COMMON_NAME}=${nodeUser(machine)}`,
    `${OID_ORGANIZATION}=${NODES_GROUP}`,
    `${OID_ORGANIZATION}=${configGroup(uid)}`,
  ];
  const got = subject.map((a) => `${a.type}=${a.value}`);
  if (got.length === want.length && want.every((w) => got.includes(w))) return undefined;
  return `the subject must be exactly CN=${nodeUser(machine)}, O=${NODES_GROUP}, O=${configGroup(uid)}; the request asks for ${describe(subject)}`;
}

/**
 * The config a renewal by machine's node renews: the one live config that issued its identity.
 * A newcomer naming the same machine in another namespace takes nothing from it; a config that
 * has not issued an identity (a name reused after deletion) renews nobody's certificate.
 */
function renewalHolder(
  machine: string,
  configs: MachineConfig[],
  uids: string[],
): Decision | { action: 'approve'; config: string; uid: string } {
  if (configs.length === 0) {
    // No config here names it: a deleted machine (never renewed) or another controller's.
    return {
      action: 'ignore',
      why: `no OscarConfig this controller watches names machine ${machine}: not renewed here`,
    };
  }
  const holders = configs.filter((c) => c.issued);
  const [holder] = holders;
  if (holder === undefined) {
    return {
      action: 'deny',
      reason: 'IdentityNotIssued',
      message: `no OscarConfig naming machine ${machine} (${configs.map((c) => c.config).join(', ')}) has issued its identity yet: a certificate of an earlier machine of that name renews nothing; the new machine bootstraps with its own token`,
    };
  }
  if (holders.length > 1) {
    return {
      action: 'deny',
      reason: 'MachineNameTaken',
      message: `machine ${machine} holds identities issued by OscarConfigs ${holders.map((c) => c.config).join(', ')}: node identities are cluster-wide; rename one machine`,
    };
  }
  return renewalOfHolder(machine, holder, uids);
}

/**
 * A renewal keeps the identity's config UID, and only the holder's: a certificate of an earlier
 * machine of the same name (another UID) or of the form before UIDs (none) renews nothing.
 */
function renewalOfHolder(
  machine: string,
  holder: MachineConfig,
  uids: string[],
): Decision | { action: 'approve'; config: string; uid: string } {
  if (uids.length === 0) {
    return {
      action: 'deny',
      reason: 'IdentityOutdated',
      message: `the certificate of oscar:node:${machine} names no ${configGroup('<uid>')} group: it was issued before node identities were bound to their OscarConfig and is not renewed; re-provision the machine (docs/identity.md, "Upgrading")`,
      config: holder.config,
    };
  }
  if (uids.length !== 1 || uids[0] !== holder.uid) {
    return {
      action: 'deny',
      reason: 'IdentityNotCurrent',
      message: `the certificate was issued for OscarConfig UID ${uids.join(', ')}; machine ${machine}'s identity is now issued by ${holder.config} (UID ${holder.uid}): a certificate of an earlier machine of that name renews nothing`,
      config: holder.config,
    };
  }
  return { action: 'approve', config: holder.config, uid: holder.uid };
}

/** Who a request from one of oscar's identities claims to be, once its requester is known. */
interface Claim {
  action: 'claim';
  kind: 'bootstrap' | 'renewal';
  machine: string;
  config: string;
  uid: string;
  /** Set for a first identity: the token to consume. */
  tokenId?: string;
}

/**
 * A first identity: the machine and config the token was issued for, while the machine's name is
 * its own and the token unused (a retried approval of the CSR that took it is still allowed).
 */
function bootstrapClaim(csr: CsrObject, tokenId: string, ctx: DecideContext): Decision | Claim {
  const found = ctx.tokenMachine(tokenId);
  if (!found) {
    // Not a token of a config this controller watches: another oscar controller's (one per
    // namespace set), or a token no config holds any more. Only approvals matter: leave it.
    return {
      action: 'ignore',
      why: `bootstrap token ${tokenId} is not the current token of an OscarConfig this controller watches`,
    };
  }
  const { machine, config, uid } = found;
  const others = ctx.machineConfigs(machine).filter((c) => c.config !== found.config);
  // A retried approval of the CSR that already took this token is the holder's: not a newcomer.
  if (others.length > 0 && found.tokenAvailable) {
    return {
      action: 'deny',
      reason: 'MachineNameTaken',
      message: `machine ${machine} is also named by OscarConfig ${others.map((c) => c.config).join(', ')}: node identities are cluster-wide (oscar:node:${machine}); rename this machine`,
      config,
    };
  }
  if (!found.tokenAvailable && found.consumedBy !== csr.metadata.name) {
    return {
      action: 'deny',
      reason: 'TokenAlreadyUsed',
      message: `bootstrap token ${tokenId} of machine ${machine} was already used${found.consumedBy ? ` (by CSR ${found.consumedBy})` : ''}: one identity per token; renewals are requested with the node's certificate`,
      config,
    };
  }
  return { action: 'claim', kind: 'bootstrap', machine, config, uid, tokenId };
}

/** A renewal: the node's own machine, under the one live config holding its identity. */
function renewalClaim(machine: string, uids: string[], ctx: DecideContext): Decision | Claim {
  const renewal = renewalHolder(machine, ctx.machineConfigs(machine), uids);
  if (renewal.action !== 'approve') return renewal;
  return { action: 'claim', kind: 'renewal', machine, config: renewal.config, uid: renewal.uid };
}

/** Why a claimed request is refused (its reason and message), or nothing. */
interface Refusal {
  reason: string;
  message: string;
}

/** A parsed request under review, with the identity it claims. */
interface Review {
  csr: CsrObject;
  request: ParsedRequest;
  claim: Claim;
  maxExpirationSeconds: number;
}

/** The only signer oscar approves for. */
function signerIsNodeSigner(csr: CsrObject): Refusal | undefined {
  if (csr.spec.signerName === NODE_SIGNER) return undefined;
  return {
    reason: 'WrongSigner',
    message: `spec.signerName is ${csr.spec.signerName}; an oscar node asks only ${NODE_SIGNER}`,
  };
}

/** The request parses (spec.request is a PKCS#10 request oscar reads). */
function requestParses(parsed: ParsedRequest | Error): Refusal | undefined {
  if (!(parsed instanceof Error)) return undefined;
  return { reason: 'InvalidRequest', message: `spec.request: ${parsed.message}` };
}

/** An accepted key (KeyNotAllowed) whose signature, by an accepted algorithm, verifies. */
function signatureVerifies({ request }: Review): Refusal | undefined {
  return signatureRefusal(request);
}

/** Exactly CN=oscar:node:<machine>, O=oscar:nodes, O=oscar:config:<uid> of the claim. */
function subjectIsExact({ request, claim }: Review): Refusal | undefined {
  const subject = subjectProblem(request.subject, claim.machine, claim.uid);
  if (subject === undefined) return undefined;
  return claim.kind === 'renewal'
    ? { reason: 'RenewalSubjectMismatch', message: `a renewal names its requester: ${subject}` }
    : {
        reason: 'WrongSubject',
        message: `bootstrap token of machine ${claim.machine}: ${subject}`,
      };
}

/** No attributes, so no extension request: no subject alternative names. */
function noAttributes({ request }: Review): Refusal | undefined {
  if (request.attributes.length === 0) return undefined;
  return {
    reason: 'AttributesNotAllowed',
    message: `spec.request carries attributes (${request.attributes.join(', ')}): no extensions, no subject alternative names`,
  };
}

/** Usages within the allowed ones, client auth among them. */
function clientAuthUsages({ csr }: Review): Refusal | undefined {
  const usages = csr.spec.usages ?? [];
  const extra = usages.filter((u) => !ALLOWED_USAGES.includes(u));
  if (extra.length === 0 && usages.includes('client auth')) return undefined;
  return {
    reason: 'WrongUsages',
    message: `spec.usages must be within ${ALLOWED_USAGES.join(', ')} and include client auth; got ${usages.join(', ') || '(none)'}`,
  };
}

/** expirationSeconds given and at most the cap. */
function lifetimeWithinCap({ csr, maxExpirationSeconds }: Review): Refusal | undefined {
  const seconds = csr.spec.expirationSeconds;
  if (seconds !== undefined && seconds <= maxExpirationSeconds) return undefined;
  return {
    reason: 'LifetimeTooLong',
    message: `spec.expirationSeconds must be set and at most ${String(maxExpirationSeconds)}; got ${seconds === undefined ? '(unset: the signer default)' : String(seconds)}`,
  };
}

/** The checks of a parsed request, in order: the first refusal is the decision. */
const REQUEST_CHECKS: readonly ((review: Review) => Refusal | undefined)[] = [
  signatureVerifies,
  subjectIsExact,
  noAttributes,
  clientAuthUsages,
  lifetimeWithinCap,
];

function firstRefusal(
  csr: CsrObject,
  parsed: ParsedRequest | Error,
  claim: Claim,
  maxExpirationSeconds: number,
): Refusal | undefined {
  const early = signerIsNodeSigner(csr) ?? requestParses(parsed);
  // A request that does not parse has its refusal by then (early is set).
  if (early || parsed instanceof Error) return early;
  const review: Review = { csr, request: parsed, claim, maxExpirationSeconds };
  for (const check of REQUEST_CHECKS) {
    const refusal = check(review);
    if (refusal) return refusal;
  }
  return undefined;
}

export function decide(
  csr: CsrObject,
  parsed: ParsedRequest | Error,
  ctx: DecideContext,
): Decision {
  if (decided(csr)) return { action: 'ignore', why: 'already decided' };
  const requester = requesterOf(csr);
  if (!requester) return { action: 'ignore', why: 'not requested by an oscar identity' };
  const claim =
    requester.kind === 'bootstrap'
      ? bootstrapClaim(csr, requester.tokenId, ctx)
      : renewalClaim(requester.machine, requester.uids, ctx);
  if (claim.action !== 'claim') return claim;
  const refusal = firstRefusal(csr, parsed, claim, ctx.maxExpirationSeconds);
  if (refusal) return { action: 'deny', ...refusal, config: claim.config };
  const { kind, machine, config, uid, tokenId } = claim;
  return {
    action: 'approve',
    kind,
    machine,
    config,
    uid,
    ...(tokenId !== undefined ? { tokenId } : {}),
  };
}
