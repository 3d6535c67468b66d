import { readFileSync } from 'node:fs';

/** Set by the bundler (hack/image/bundle.ts): a bundled oscar has no package.json beside it. */
declare const __OSCAR_VERSION__: string | undefined;

/** The package version, read once from package.json (from cli/support/ or dist/cli/support/). */
export const VERSION: string = (() => {
  if (typeof __OSCAR_VERSION__ === 'string') return __OSCAR_VERSION__;
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'oscar' && pkg.version) return pkg.version;
    } catch {
      // try the next candidate
    }
  }
  return '0.0.0-unknown';
})();

/**
 * The User-Agent of a component's requests (Kubernetes API, external renderers), in the form
 * kubectl uses, so an API server's audit log and metrics tell the agent from the controller:
 * `oscar-agent/0.1.0 (linux/x64) node/v24.22.3`.
 */
export function userAgent(component: string): string {
  return `oscar-${component}/${VERSION} (${process.platform}/${process.arch}) node/${process.version}`;
}
