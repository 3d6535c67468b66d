// Test PKI for the throw-away API server: one CA, a serving certificate, client
// certificates for any user/groups, and the service-account signing key pair.
// Node 20 cannot create X.509 certificates, so this drives the openssl CLI.
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Who a client certificate speaks for: CN is the user name, each O one group. */
export interface Identity {
  user: string;
  groups?: readonly string[];
}

export interface CertPair {
  certPath: string;
  keyPath: string;
}

// openssl needs a config file with a [req] section; the default one would add CA
// extensions to every certificate, so every call uses this empty one instead.
const MINIMAL_CONFIG = '[req]\ndistinguished_name = dn\n[dn]\n';

// Characters that have a meaning inside openssl's -subj syntax or in RBAC names we never expect.
const UNSAFE_NAME = /[/\\+=,"\n\r]/;

/** Builds the `-subj` argument for an identity; refuses names openssl would misparse. */
export function subjectFor(identity: Identity): string {
  const names = [identity.user, ...(identity.groups ?? [])];
  for (const [i, name] of names.entries()) {
    const field = i === 0 ? 'user' : `groups[${i - 1}]`;
    if (name.length === 0) {
      throw new Error(`identity.${field} is empty; give a non-empty user or group name`);
    }
    if (UNSAFE_NAME.test(name)) {
      throw new Error(
        `identity.${field} ${JSON.stringify(name)} contains one of / \\ + = , " or a newline; ` +
          'use a plain name such as "system:node:node-1"',
      );
    }
  }
  const groups = (identity.groups ?? []).map((g) => `/O=${g}`).join('');
  return `${groups}/CN=${identity.user}`;
}

async function openssl(dir: string, args: readonly string[]): Promise<void> {
  try {
    await run('openssl', args, { cwd: dir });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT') {
      throw new Error(
        'openssl is not on PATH; install it (apt-get install openssl, see hack/deps.sh)',
        { cause: err },
      );
    }
    throw new Error(`openssl ${args[0] ?? ''} failed: ${e.stderr ?? e.message}`, { cause: err });
  }
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

export class TestPki {
  readonly caPath: string;
  readonly caKeyPath: string;
  private readonly configPath: string;

  constructor(readonly dir: string) {
    this.caPath = join(dir, 'ca.crt');
    this.caKeyPath = join(dir, 'ca.key');
    this.configPath = join(dir, 'openssl.cnf');
  }

  /** Creates the CA (valid 10 years: a test run must never trip over expiry). */
  async init(): Promise<void> {
    await writeFile(this.configPath, MINIMAL_CONFIG, { mode: 0o600 });
    await openssl(this.dir, [
      'req',
      '-x509',
      '-new',
      ...EC_KEY,
      '-keyout',
      this.caKeyPath,
      '-out',
      this.caPath,
      '-subj',
      '/CN=oscar-testenv-ca',
      '-days',
      '3650',
      '-config',
      this.configPath,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
  }

  private async issue(
    name: string,
    subject: string,
    extKeyUsage: string,
    extra: readonly string[],
  ): Promise<CertPair> {
    const certPath = join(this.dir, `${name}.crt`);
    const keyPath = join(this.dir, `${name}.key`);
    await openssl(this.dir, [
      'req',
      '-x509',
      '-new',
      ...EC_KEY,
      '-keyout',
      keyPath,
      '-out',
      certPath,
      '-subj',
      subject,
      '-days',
      '365',
      '-config',
      this.configPath,
      '-CA',
      this.caPath,
      '-CAkey',
      this.caKeyPath,
      '-addext',
      'basicConstraints=critical,CA:FALSE',
      '-addext',
      'keyUsage=critical,digitalSignature',
      '-addext',
      `extendedKeyUsage=${extKeyUsage}`,
      ...extra,
    ]);
    return { certPath, keyPath };
  }

  /** Serving certificate for the API server, valid for every address clients may use. */
  issueServing(ips: readonly string[], dnsNames: readonly string[]): Promise<CertPair> {
    const san = [...ips.map((ip) => `IP:${ip}`), ...dnsNames.map((d) => `DNS:${d}`)].join(',');
    return this.issue('apiserver', '/CN=kube-apiserver', 'serverAuth', [
      '-addext',
      `subjectAltName=${san}`,
    ]);
  }

  /** Client certificate: the API server maps CN to the user and each O to a group. */
  issueClient(fileName: string, identity: Identity): Promise<CertPair> {
    if (!/^[A-Za-z0-9._-]+$/.test(fileName)) {
      throw new Error(
        `client certificate file name ${JSON.stringify(fileName)} must match [A-Za-z0-9._-]+`,
      );
    }
    return this.issue(fileName, subjectFor(identity), 'clientAuth', []);
  }

  /** Key pair the API server signs service-account tokens with (TokenRequest). */
  async serviceAccountKeys(): Promise<{ publicKeyPath: string; privateKeyPath: string }> {
    const privateKeyPath = join(this.dir, 'sa.key');
    const publicKeyPath = join(this.dir, 'sa.pub');
    await openssl(this.dir, [
      'genpkey',
      '-algorithm',
      'EC',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-out',
      privateKeyPath,
    ]);
    await openssl(this.dir, ['pkey', '-in', privateKeyPath, '-pubout', '-out', publicKeyPath]);
    return { publicKeyPath, privateKeyPath };
  }
}
