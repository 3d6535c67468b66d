/**
 * The node's key and certificate on disk: one file, <cert dir>/node.pem, holding the private key
 * and the certificate together, so a crash can never leave a key with another key's certificate.
 * Written atomically (temp file, fsync, rename, fsync of the directory), mode 0600, in a directory
 * of mode 0700 that must be a real directory (not a symlink). Read without following a symlink,
 * only when the file and its directory are the agent's own (another owner could know or swap the
 * key), narrowed to 0600 / 0700 when found wider, and checked before use: the key must match the certificate, the certificate must name this
 * node, and it must not have expired — anything else is reported and not used.
 *
 * A key waiting for its certificate is kept in pending.key, so an agent restarted while its
 * request is pending finds the same request (named after the key) instead of making another.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { join } from 'node:path';

export const NODE_PEM = 'node.pem';
export const PENDING_KEY = 'pending.key';

export interface NodeCertificate {
  key: KeyObject;
  keyPem: string;
  certPem: string;
  cert: X509Certificate;
  /** When this node received it (the file's mtime), for the renewal schedule. */
  receivedAt: Date;
}

export class CertificateFileError extends Error {
  override name = 'CertificateFileError';
}

/** The agent's own uid (root on a node); a key file or its directory must be its. */
function agentUid(): number {
  return process.getuid?.() ?? 0;
}

/**
 * Creates the directory (0700) or checks the one there: a real directory, not a symlink, the
 * agent's own, narrowed to 0700 if widened.
 */
export async function ensureCertDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const st = await lstat(dir);
  if (!st.isDirectory()) {
    throw new CertificateFileError(`${dir} is not a directory (a symlink?); remove it`);
  }
  if (st.uid !== agentUid()) {
    // its owner could replace node.pem or pending.key between the agent's writes and reads
    throw new CertificateFileError(
      `${dir} is owned by uid ${String(st.uid)}, not the agent's (${String(agentUid())}): its owner could swap the key; remove the directory (the agent creates it 0700) or chown it`,
    );
  }
  if ((st.mode & 0o077) !== 0) {
    // Someone widened it: narrow it again rather than keep a key where others can read it.
    const { chmod } = await import('node:fs/promises');
    await chmod(dir, 0o700);
  }
}

async function readNoFollow(path: string): Promise<{ text: string; mtime: Date } | undefined> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw new CertificateFileError(`${path} is a symlink; remove it`);
    throw error;
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new CertificateFileError(`${path} is not a regular file`);
    if (st.uid !== agentUid()) {
      throw new CertificateFileError(
        `${path} is owned by uid ${String(st.uid)}, not the agent's: its owner may know the key; remove it`,
      );
    }
    if ((st.mode & 0o077) !== 0) {
      // widened by hand or by an older tool: a private key is the agent's alone
      await handle.chmod(0o600);
    }
    if (st.size > 64 * 1024) throw new CertificateFileError(`${path} is larger than 64 KiB`);
    return { text: await handle.readFile('utf8'), mtime: st.mtime };
  } finally {
    await handle.close();
  }
}

/** fsync of a directory: a rename in it survives a crash. */
async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function writeAtomic(dir: string, name: string, text: string): Promise<void> {
  const target = join(dir, name);
  const temp = join(dir, `.${name}.${String(process.pid)}.tmp`);
  await rm(temp, { force: true });
  const handle = await open(
    temp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, target);
  await syncDir(dir);
}

const PEM_BLOCK = /-----BEGIN ([A-Z ]+)-----[\s\S]+?-----END \1-----\n?/g;

function blocks(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(PEM_BLOCK)) {
    const label = m[1] ?? '';
    if (!out.has(label)) out.set(label, m[0].endsWith('\n') ? m[0] : `${m[0]}\n`);
  }
  return out;
}

/**
 * A certificate's subject as sorted "TYPE=value" strings. The signer (Go's crypto/x509) writes
 * several organisations as one multi-valued RDN, which node:crypto prints as "O=a + O=b".
 */
export function subjectAttributes(subject: string): string[] {
  return subject
    .split('\n')
    .flatMap((rdn) => rdn.split(' + '))
    .sort();
}

/** Why a certificate cannot serve as this node's identity at `now`, or undefined when it can. */
export function unusable(
  c: { cert: X509Certificate; key: KeyObject },
  expected: { commonName: string; organizations: readonly string[] },
  now: Date,
): string | undefined {
  if (!c.cert.checkPrivateKey(c.key)) return 'the key does not match the certificate';
  const subject = subjectAttributes(c.cert.subject);
  const want = [`CN=${expected.commonName}`, ...expected.organizations.map((o) => `O=${o}`)].sort();
  if (JSON.stringify(subject) !== JSON.stringify(want)) {
    return `the certificate names ${c.cert.subject.replaceAll('\n', ', ')}, not ${want.join(', ')}`;
  }
  if (new Date(c.cert.validTo).getTime() <= now.getTime()) {
    return `the certificate expired at ${new Date(c.cert.validTo).toISOString()}`;
  }
  return undefined;
}

export class CertificateStore {
  constructor(readonly dir: string) {}

  /** The stored key and certificate, undefined when there is none. Malformed: an error. */
  async load(): Promise<NodeCertificate | undefined> {
    const read = await readNoFollow(join(this.dir, NODE_PEM));
    if (!read) return undefined;
    const found = blocks(read.text);
    const keyPem = found.get('PRIVATE KEY') ?? found.get('EC PRIVATE KEY');
    const certPem = found.get('CERTIFICATE');
    if (keyPem === undefined || certPem === undefined) {
      throw new CertificateFileError(
        `${join(this.dir, NODE_PEM)} must hold a private key and a certificate`,
      );
    }
    try {
      return {
        key: createPrivateKey(keyPem),
        keyPem,
        certPem,
        cert: new X509Certificate(certPem),
        receivedAt: read.mtime,
      };
    } catch (error) {
      throw new CertificateFileError(`${join(this.dir, NODE_PEM)}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  async save(keyPem: string, certPem: string): Promise<NodeCertificate> {
    await ensureCertDir(this.dir);
    await writeAtomic(this.dir, NODE_PEM, `${keyPem.trimEnd()}\n${certPem.trimEnd()}\n`);
    const st = await stat(join(this.dir, NODE_PEM));
    return {
      key: createPrivateKey(keyPem),
      keyPem,
      certPem,
      cert: new X509Certificate(certPem),
      receivedAt: st.mtime,
    };
  }

  async loadPendingKey(): Promise<KeyObject | undefined> {
    let read;
    try {
      read = await readNoFollow(join(this.dir, PENDING_KEY));
    } catch (error) {
      // a link, another owner's file: never used; the new key's rename replaces it
      if (error instanceof CertificateFileError) return undefined;
      throw error;
    }
    if (!read) return undefined;
    try {
      return createPrivateKey(read.text);
    } catch {
      return undefined; // a torn or foreign file: a new key replaces it
    }
  }

  async savePendingKey(key: KeyObject): Promise<void> {
    await ensureCertDir(this.dir);
    await writeAtomic(
      this.dir,
      PENDING_KEY,
      key.export({ type: 'pkcs8', format: 'pem' }).toString(),
    );
  }

  async clearPendingKey(): Promise<void> {
    await rm(join(this.dir, PENDING_KEY), { force: true });
  }
}
