import { describe, expect, it } from 'vitest';
import { caCertHash } from './ca-hash.js';

// A throw-away self-signed P-256 CA; the expected pin is what kubeadm's documented recipe gives:
//   openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | sha256sum
const CA = `-----BEGIN CERTIFICATE-----
MIIBezCCASGgAwIBAgIUYv9XwT9SWnuFurPAAb0VVR0dJPUwCgYIKoZIzj0EAwIw
EjEQMA4GA1UEAwwHdGVzdC1jYTAgFw0yNjEyMDQwMjM1MTRaGA8yMTI2MTExMDAy
MzUxNFowEjEQMA4GA1UEAwwHdGVzdC1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABK277dfn6AB0usD5yd8fgH2r6eCvmVULy8MzpTUfk7Qk+mKxEqZFM2FVIB2A
PxtFOLOnCMABwOGKMweWSTWQEIKjUzBRMB0GA1UdDgQWBBRt3GO1kUTBBBKeQ6C5
Dye3ox2jpDAfBgNVHSMEGDAWgBRt3GO1kUTBBBKeQ6C5Dye3ox2jpDAPBgNVHRMB
Af8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIGUys9zI64rGzu/W+lIMEIAb8lDz
roaq9nDLR0FQvldIAiEArBvHZu61EBHMUnsRI29sniWuV568RyCqk+j6R9lOuV8=
-----END CERTIFICATE-----
`;

describe('caCertHash', () => {
  it('is sha256 of the DER SubjectPublicKeyInfo, as kubeadm pins a CA', () => {
    expect(caCertHash(CA)).toBe(
      'sha256:301b61ab784c20522dfdd1b89835f71236aa8fad1c322166f9c53f834ae727bf',
    );
    // memoized, and the same for the same PEM
    expect(caCertHash(CA)).toBe(caCertHash(CA.replace(/\n$/, '')));
  });

  it('refuses what is not a certificate', () => {
    expect(() => caCertHash('not a pem')).toThrow();
  });
});
