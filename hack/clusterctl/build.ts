/**
 * `npm run build:clusterctl`: oscar as a clusterctl bootstrap provider — a local provider
 * repository in dist/clusterctl/ laid out as clusterctl reads one:
 *
 *   dist/clusterctl/bootstrap-oscar/v<version>/bootstrap-components.yaml   (kubectl kustomize deploy/clusterctl)
 *   dist/clusterctl/bootstrap-oscar/v<version>/metadata.yaml               (deploy/clusterctl/metadata.yaml)
 *   dist/clusterctl/clusterctl.yaml                                        (the providers: entry naming it)
 *
 * Usage: node --import tsx hack/clusterctl/build.ts [--out DIR] [--kubectl PATH]; prints the
 * clusterctl config's path. kubectl: --kubectl, $KUBECTL, else the one on PATH.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);
const repo = fileURLToPath(new URL('../..', import.meta.url));

export interface ProviderRepository {
  /** The clusterctl config (`--config`) that names the provider. */
  config: string;
  components: string;
  version: string;
}

export async function buildProviderRepository(
  opts: { outDir?: string; kubectl?: string } = {},
): Promise<ProviderRepository> {
  const outDir = opts.outDir ?? join(repo, 'dist', 'clusterctl');
  const kubectl = opts.kubectl ?? process.env.KUBECTL ?? 'kubectl';
  const pkg = JSON.parse(await readFile(join(repo, 'package.json'), 'utf8')) as { version: string };
  const version = `v${pkg.version}`;
  const dir = join(outDir, 'bootstrap-oscar', version);
  await mkdir(dir, { recursive: true });
  const { stdout } = await execFileP(kubectl, ['kustomize', join(repo, 'deploy', 'clusterctl')], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const components = join(dir, 'bootstrap-components.yaml');
  await writeFile(components, stdout);
  await copyFile(join(repo, 'deploy', 'clusterctl', 'metadata.yaml'), join(dir, 'metadata.yaml'));
  const config = join(outDir, 'clusterctl.yaml');
  await writeFile(
    config,
    `providers:\n  - name: oscar\n    url: file://${components}\n    type: BootstrapProvider\n`,
  );
  return { config, components, version };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const at = (name: string): string | undefined => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const outDir = at('--out');
  const kubectl = at('--kubectl');
  const built = await buildProviderRepository({
    ...(outDir ? { outDir } : {}),
    ...(kubectl ? { kubectl } : {}),
  });
  console.log(built.config);
}
