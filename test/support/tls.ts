/**
 * Certificates for tests of TLS, made with the openssl command: a CA of the
 * test's own and a server certificate it signed for `localhost` and
 * 127.0.0.1, as a managed database presents one; and a second, unrelated CA
 * (a wrong `sslrootcert`).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificates {
  /** PEM of the CA that signed the server's certificate. */
  ca: string;
  /** PEM of another CA, which signed nothing here. */
  otherCa: string;
  cert: string;
  key: string;
}

export function makeCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'ratchet-tls-'));
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  try {
    for (const name of ['ca', 'other-ca'])
      openssl(
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '2',
        '-subj',
        `/CN=Ratchet test ${name}`,
        '-keyout',
        `${name}.key`,
        '-out',
        `${name}.crt`,
      );
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr');
    writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
    openssl(
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      'san.ext',
      '-out',
      'server.crt',
    );
    const read = (file: string) => readFileSync(join(dir, file), 'utf8');
    return { ca: read('ca.crt'), otherCa: read('other-ca.crt'), cert: read('server.crt'), key: read('server.key') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
