/**
 * A TLS serving certificate for a test server on 127.0.0.1 (Cluster API's Runtime Extension, a
 * webhook): a CA of its own (hack/testenv/certs.ts, openssl) in `dir`, the pair it issued, and the
 * bytes a server and its clients load.
 */
import { readFile } from 'node:fs/promises';
import { TestPki } from '../../hack/testenv/certs.js';

export interface LoopbackServingCert {
  certPath: string;
  keyPath: string;
  caPath: string;
  cert: Buffer;
  key: Buffer;
  /** The CA bundle a client trusts the server with. */
  ca: Buffer;
}

/**
 * Makes the CA in `dir` and issues a serving certificate for IP 127.0.0.1 (and `dnsNames`, none
 * unless given).
 */
export async function loopbackServingCert(
  dir: string,
  dnsNames: readonly string[] = [],
): Promise<LoopbackServingCert> {
  const pki = new TestPki(dir);
  await pki.init();
  const pair = await pki.issueServing(['127.0.0.1'], dnsNames);
  return {
    ...pair,
    caPath: pki.caPath,
    cert: await readFile(pair.certPath),
    key: await readFile(pair.keyPath),
    ca: await readFile(pki.caPath),
  };
}
