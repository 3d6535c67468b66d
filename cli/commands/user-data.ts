/**
 * `oscar user-data NAME`: a machine's user data from its OscarConfig — the Secret its status names
 * (status.dataSecretName), key `value` — for a machine created by hand (bare metal, a VM): paste it
 * into the machine's user data, or write it to a NoCloud seed. Refuses with the config's own
 * Ready condition while there is none yet.
 */
import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { OSCAR_CONFIG_RESOURCE, BOOTSTRAP_API_VERSION } from '../../api/bootstrap/constants.js';
import type { ConfigObject } from '../../controller/bootstrap/types.js';
import type { DataObject } from '../../controller/kube/types.js';
import { isNotFound } from '../../kube/client.js';
import { kubeHttp, loadKubeCredentials } from '../../kube/credentials.js';

export interface UserDataOptions {
  kubeconfig?: string;
  context?: string;
  namespace: string;
  /** --out: write it to this file (mode 0600). */
  out?: string;
}

export async function userDataCommand(
  program: Command,
  name: string,
  opts: UserDataOptions,
): Promise<void> {
  const http = kubeHttp(await loadKubeCredentials(opts.kubeconfig, opts.context));
  try {
    const ns = opts.namespace;
    let config: ConfigObject;
    try {
      config = await http.request<ConfigObject>(
        'GET',
        `/apis/${BOOTSTRAP_API_VERSION}/namespaces/${ns}/${OSCAR_CONFIG_RESOURCE}/${name}`,
      );
    } catch (error) {
      if (isNotFound(error)) program.error(`oscar user-data: OscarConfig ${ns}/${name} not found`);
      throw error;
    }
    const secretName = config.status?.dataSecretName;
    if (!secretName || config.status?.initialization?.dataSecretCreated !== true) {
      const ready = config.status?.conditions?.find((c) => c.type === 'Ready');
      program.error(
        `oscar user-data: OscarConfig ${ns}/${name} has no user data yet${ready ? ` (${ready.reason}: ${ready.message})` : ' (is the oscar controller running?)'}`,
      );
    }
    const secret = await http.request<DataObject>(
      'GET',
      `/api/v1/namespaces/${ns}/secrets/${secretName}`,
    );
    const value = Buffer.from(secret.data?.value ?? '', 'base64');
    const format = Buffer.from(secret.data?.format ?? '', 'base64').toString('utf8');
    if (opts.out !== undefined) {
      // It holds the machine's bootstrap token: readable by its owner only.
      await writeFile(opts.out, value, { mode: 0o600 });
      process.stderr.write(
        `oscar: wrote ${format} user data (${String(value.length)} bytes) to ${opts.out}\n`,
      );
    } else {
      process.stdout.write(value);
    }
  } finally {
    http.close();
  }
}
