/**
 * What the node tests and benches need to bootstrap machines: the agent's executable served over
 * loopback HTTP as a machine downloads it, and a controller that bootstraps machines with it.
 */
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runController, type ControllerHandle } from '../../controller/main.js';
import type { TestEnvInfo } from '../../hack/testenv/testenv.js';
import { createLogger } from '../../log/logger.js';

export interface AgentServer {
  /** Where a machine downloads the agent: http://127.0.0.1:PORT/oscar-agent. */
  url: string;
  close(): Promise<void>;
}

/** Serves the file at `path` as /oscar-agent (anything else is a 404) on a free loopback port. */
export async function serveAgent(path: string): Promise<AgentServer> {
  const server = createServer((req, res) => {
    if (req.url !== '/oscar-agent') {
      res.writeHead(404).end();
      return;
    }
    void stat(path).then((st) => {
      res.writeHead(200, { 'content-length': st.size });
      createReadStream(path).pipe(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/oscar-agent`,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => {
          r();
        });
      }),
  };
}

/** The controller, in process, watching `namespace` and bootstrapping machines with the served agent. */
export async function runBootstrapController(o: {
  env: { kubeconfigPath: string; info: TestEnvInfo };
  namespace: string;
  agentUrl: string;
  agentSha256: string;
  identityWaitMs?: number;
}): Promise<ControllerHandle> {
  return runController({
    kubeconfig: o.env.kubeconfigPath,
    namespaces: [o.namespace],
    metricsAddr: '',
    leaderElect: false,
    leaseDurationMs: 15_000,
    log: createLogger({ component: 'controller', level: 'warn' }),
    bootstrap: {
      enabled: true,
      apiServerUrl: o.env.info.server,
      caPem: await readFile(o.env.info.caPath, 'utf8'),
      agentUrl: o.agentUrl,
      agentSha256: o.agentSha256,
      ...(o.identityWaitMs !== undefined ? { identityWaitMs: o.identityWaitMs } : {}),
    },
  });
}
