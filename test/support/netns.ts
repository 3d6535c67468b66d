// A node with a network the test controls, without touching the host's network namespace: two
// namespaces the test makes (a "gateway" and the node's), a veth pair between them, and a small
// TCP forwarder in the gateway that reaches a server on the host's loopback (the test API server)
// through a Unix socket — a socket path crosses network namespaces, a TCP connection does not.
// TLS passes through untouched, so the node verifies the API server's certificate as usual.
import { spawn, type ChildProcess } from 'node:child_process';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from './exec.js';

export interface NodeNetwork {
  /** Path to pass to systemd-nspawn --network-namespace-path. */
  nodeNsPath: string;
  /** The gateway's address, where the forwarder listens (the node's route to the API server). */
  gatewayIp: string;
  nodeIp: string;
  /** The node's interface. */
  device: string;
  /** Forwards gatewayIp:port to 127.0.0.1:targetPort on the host. */
  forward(port: number, targetPort: number): Promise<void>;
  cleanup(): Promise<void>;
}

async function ip(args: string[]): Promise<void> {
  const r = await run('ip', args);
  if (r.code !== 0) throw new Error(`ip ${args.join(' ')} failed: ${r.stderr}`);
}

function pipe(a: Socket, b: Socket): void {
  a.pipe(b).pipe(a);
  a.on('error', () => b.destroy());
  b.on('error', () => a.destroy());
  a.on('close', () => b.destroy());
  b.on('close', () => a.destroy());
}

/** The forwarder that runs inside the gateway namespace (a node -e script). */
const GATEWAY_FORWARDER = `
const net = require('node:net');
const [host, port, sock] = process.argv.slice(1);
const server = net.createServer((c) => {
  const u = net.createConnection(sock);
  c.pipe(u).pipe(c);
  for (const [a, b] of [[c, u], [u, c]]) { a.on('error', () => b.destroy()); a.on('close', () => b.destroy()); }
});
server.listen(Number(port), host, () => process.stdout.write('listening\\n'));
`;

/**
 * Makes the namespaces oscar-gw-ID and oscar-node-ID (/run/netns), with 10.203.N.1 (gateway) and
 * 10.203.N.2 (node, interface oscar0) on a veth pair. cleanup() removes everything.
 */
export async function nodeNetwork(id: string, subnet: number): Promise<NodeNetwork> {
  const gw = `oscar-gw-${id}`;
  const node = `oscar-node-${id}`;
  const gatewayIp = `10.203.${String(subnet)}.1`;
  const nodeIp = `10.203.${String(subnet)}.2`;
  const device = 'oscar0';
  const work = await mkdtemp(join(tmpdir(), 'oscar-netns-'));
  const children: ChildProcess[] = [];
  const servers: Server[] = [];
  const cleanup = async (): Promise<void> => {
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(
      servers.map(
        (s) =>
          new Promise<void>((r) => {
            s.close(() => {
              r();
            });
          }),
      ),
    );
    await run('ip', ['netns', 'delete', gw]);
    await run('ip', ['netns', 'delete', node]);
    await rm(work, { recursive: true, force: true });
  };
  try {
    await ip(['netns', 'add', gw]);
    await ip(['netns', 'add', node]);
    await ip([
      '-n',
      gw,
      'link',
      'add',
      'gw0',
      'type',
      'veth',
      'peer',
      'name',
      device,
      'netns',
      node,
    ]);
    await ip(['-n', gw, 'addr', 'add', `${gatewayIp}/30`, 'dev', 'gw0']);
    await ip(['-n', node, 'addr', 'add', `${nodeIp}/30`, 'dev', device]);
    for (const [ns, dev] of [
      [gw, 'gw0'],
      [gw, 'lo'],
      [node, device],
      [node, 'lo'],
    ] as const) {
      await ip(['-n', ns, 'link', 'set', dev, 'up']);
    }
  } catch (error) {
    await cleanup();
    throw error;
  }
  let n = 0;
  return {
    nodeNsPath: `/run/netns/${node}`,
    gatewayIp,
    nodeIp,
    device,
    cleanup,
    forward: async (port, targetPort) => {
      const sock = join(work, `fwd-${String(n++)}.sock`);
      const server = createServer((c) => {
        pipe(c, createConnection({ host: '127.0.0.1', port: targetPort }));
      });
      servers.push(server);
      await new Promise<void>((r) => server.listen(sock, r));
      const child = spawn(
        'ip',
        [
          'netns',
          'exec',
          gw,
          process.execPath,
          '-e',
          GATEWAY_FORWARDER,
          gatewayIp,
          String(port),
          sock,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      children.push(child);
      await new Promise<void>((resolve, reject) => {
        let err = '';
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        child.stdout.on('data', (d: Buffer) => {
          if (d.toString().includes('listening')) resolve();
        });
        child.once('exit', (code) => {
          reject(new Error(`the gateway forwarder exited (${String(code)}): ${err}`));
        });
      });
    },
  };
}
