// Command-line wrapper around testenv.ts for humans and shell scripts:
//   node --import tsx hack/testenv/cli.ts start          # prints export lines
//   node --import tsx hack/testenv/cli.ts stop [state]   # default: $OSCAR_TESTENV_STATE; --all for every CLI-started one
//   also: status, stop-apiserver [--kill], start-apiserver, kubeconfig --user U [--group G...]
// A cluster started here belongs to no process: it runs until `stop`.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Command } from 'commander';
import { attachTestEnv, startTestEnv } from './testenv.js';
import { readState, runsRoot, teardownRun } from './state.js';

const log = (msg: string): void => {
  process.stderr.write(`testenv: ${msg}\n`);
};

/** Shell-quotes a value for the printed export lines. */
const sq = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

async function cliRuns(): Promise<string[]> {
  const root = runsRoot();
  const found: string[] = [];
  for (const name of await readdir(root).catch(() => [])) {
    const stateFile = join(root, name, 'state.json');
    const state = await readState(stateFile).catch(() => undefined);
    if (state?.owner === null) found.push(stateFile);
  }
  return found;
}

function stateFromArg(arg: string | undefined): string {
  const stateFile = arg ?? process.env.OSCAR_TESTENV_STATE;
  if (stateFile === undefined || stateFile === '') {
    throw new Error('give the state file (printed by `start`) or set OSCAR_TESTENV_STATE');
  }
  return stateFile;
}

const program = new Command('testenv').description('real etcd + kube-apiserver for tests');

program
  .command('start')
  .description('start a cluster; prints shell export lines on stdout')
  .option('--crds <dir>', 'directory of CRD manifests to apply (default: deploy/crds)')
  .option('--no-crds', 'apply no CRDs')
  .option('--host <addr>', 'listen address', '127.0.0.1')
  .option('--san <name...>', 'extra subjectAltNames for the serving certificate')
  .option('--workloads', 'also run kube-scheduler and the Deployment/ReplicaSet controllers')
  .action(
    async (o: { crds: string | boolean; host: string; san?: string[]; workloads?: boolean }) => {
      const t0 = Date.now();
      const env = await startTestEnv({
        ownerPid: null,
        host: o.host,
        crdDir: o.crds === false ? null : typeof o.crds === 'string' ? o.crds : undefined,
        extraSans: o.san ?? [],
        workloads: o.workloads === true,
        log,
      });
      log(`cluster ready in ${String(Date.now() - t0)} ms`);
      process.stdout.write(
        [
          `export KUBECONFIG=${sq(env.kubeconfigPath)}`,
          `export OSCAR_TESTENV_STATE=${sq(env.stateFile)}`,
          `export OSCAR_TESTENV_KUBECTL=${sq(env.kubectlPath)}`,
          '',
        ].join('\n'),
      );
    },
  );

program
  .command('stop [stateFile]')
  .description('stop a cluster and delete its data (default: $OSCAR_TESTENV_STATE)')
  .option('--all', 'stop every CLI-started cluster on this machine (others may be using them)')
  .action(async (arg: string | undefined, o: { all?: boolean }) => {
    const explicit = arg ?? process.env.OSCAR_TESTENV_STATE;
    let files: string[];
    if (explicit !== undefined && explicit !== '') files = [explicit];
    else if (o.all === true) files = await cliRuns();
    else throw new Error('give the state file, set OSCAR_TESTENV_STATE, or pass --all');
    for (const stateFile of files) {
      const { info } = await readState(stateFile);
      await teardownRun(stateFile, info.runDir);
      log(`stopped ${info.server} and removed ${info.runDir}`);
    }
    if (files.length === 0) log('no CLI-started cluster found');
  });

program
  .command('stop-apiserver [stateFile]')
  .option('--kill', 'SIGKILL instead of a graceful SIGTERM')
  .action(async (arg: string | undefined, o: { kill?: boolean }) => {
    const env = await attachTestEnv(stateFromArg(arg));
    await env.stopApiServer({ signal: o.kill === true ? 'SIGKILL' : 'SIGTERM' });
  });

program.command('start-apiserver [stateFile]').action(async (arg?: string) => {
  const env = await attachTestEnv(stateFromArg(arg));
  await env.startApiServer();
});

program
  .command('kubeconfig [stateFile]')
  .description('write a kubeconfig for a user (client certificate) and print its path')
  .requiredOption('--user <name>', 'user name (certificate CN)')
  .option('--group <name...>', 'groups (certificate O)', [])
  .option('--namespace <ns>', 'default namespace in the context')
  .action(
    async (arg: string | undefined, o: { user: string; group: string[]; namespace?: string }) => {
      const env = await attachTestEnv(stateFromArg(arg));
      process.stdout.write(
        `${await env.writeKubeconfig({ user: o.user, groups: o.group }, o.namespace)}\n`,
      );
    },
  );

program.command('status').action(async () => {
  const root = runsRoot();
  for (const name of await readdir(root).catch(() => [])) {
    const state = await readState(join(root, name, 'state.json')).catch(() => undefined);
    if (state === undefined) continue;
    const owner = state.owner === null ? 'cli' : `pid ${String(state.owner.pid)}`;
    const api =
      state.apiserver.ref === null
        ? 'apiserver stopped'
        : `apiserver pid ${String(state.apiserver.ref.pid)}`;
    process.stdout.write(`${state.info.server}\t${owner}\t${api}\t${state.info.stateFile}\n`);
  }
});

program.parseAsync().catch((err: unknown) => {
  process.stderr.write(`testenv: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
