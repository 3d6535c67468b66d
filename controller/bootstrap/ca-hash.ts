/**
 * kubeadm's CA pin, `--discovery-token-ca-cert-hash`: "sha256:" and the hex SHA-256 of the CA
 * certificate's DER SubjectPublicKeyInfo (not of the certificate: the pin survives a re-issued CA
 * with the same key). The first certificate of a PEM bundle is the one kubeadm's cluster-info
 * names. Memoized per PEM: the bootstrap controller renders every machine with the same CA.
 */
import { createHash, X509Certificate } from 'node:crypto';

let memo: { pem: string; hash: string } | undefined;

export function caCertHash(caPem: string): string {
  if (memo?.pem === caPem) return memo.hash;
  const spki = new X509Certificate(caPem).publicKey.export({ type: 'spki', format: 'der' });
  const hash = `sha256:${createHash('sha256').update(spki).digest('hex')}`;
  memo = { pem: caPem, hash };
  return hash;
}

/** The pin, or undefined when the PEM holds no certificate ({{ apiServer.caCertHash }} then says so). */
export function caCertHashOrNone(caPem: string): string | undefined {
  try {
    return caCertHash(caPem);
  } catch {
    return undefined;
  }
}
