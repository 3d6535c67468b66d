/**
 * The controller's HTTP endpoints: /healthz (the process answers), /readyz (a standby is ready —
 * waiting is its job; a leader once its controllers' caches are synced) and /metrics.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { ControllerMetrics } from './runtime/metrics.js';

export function parseAddr(addr: string): { host: string; port: number } | undefined {
  if (addr === '' || addr === '0') return undefined;
  const i = addr.lastIndexOf(':');
  const host = i <= 0 ? '0.0.0.0' : addr.slice(0, i);
  const port = Number(addr.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(
      `--metrics-addr "${addr}": expected host:port such as ":8080" or "127.0.0.1:0"`,
    );
  }
  return { host, port };
}

/** Listens on `addr`; resolves with the server and the address it got. */
export async function serveHealth(
  addr: { host: string; port: number },
  metrics: ControllerMetrics,
  ready: () => boolean,
): Promise<{ server: Server; address: string }> {
  const app = express();
  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  app.get('/readyz', (_req, res) => {
    const ok = ready();
    res
      .status(ok ? 200 : 503)
      .type('text/plain')
      .send(ok ? 'ok' : 'not ready');
  });
  app.get('/metrics', (_req, res) => {
    metrics.registry
      .metrics()
      .then((text) => {
        res.type(metrics.registry.contentType).send(text);
      })
      .catch((error: unknown) => {
        res.status(500).send(String(error));
      });
  });
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(addr.port, addr.host, (error?: Error) => {
      if (error) reject(error);
      else resolve(s);
    });
  });
  const a = server.address() as AddressInfo;
  return { server, address: `${a.address}:${String(a.port)}` };
}

/** Closes the server and every connection it holds. */
export function closeServer(server: Server | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    if (server)
      server.close(() => {
        resolve();
      });
    else resolve();
    server?.closeAllConnections();
  });
}
