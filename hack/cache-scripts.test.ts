/**
 * The cold paths of the scripts that build or install what the suites need. A warm cache takes
 * each script's early exit, so every ordinary run skips the code a fresh machine runs; these tests
 * run that code on a tiny input instead: the real script, with stand-ins on PATH for the one
 * expensive tool it calls (debootstrap, go, buildah, apt-get and dpkg-query) and an empty OSCAR_CACHE.
 *
 * They check the exit status and the one line each script prints on stdout (its product), on the
 * cold path, then on the warm path, and that a failing tool fails the script with its reason.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const hack = fileURLToPath(new URL('.', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(script: string, env: Record<string, string>, args: string[] = []): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      [join(hack, script), ...args],
      { env: { ...process.env, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Writes an executable stand-in into dir. */
async function stub(dir: string, name: string, body: string): Promise<void> {
  const path = join(dir, name);
  await writeFile(path, `#!/usr/bin/env bash\nset -euo pipefail\n${body}\n`);
  await chmod(path, 0o755);
}

let work: string;
let stubs: string;
let cache: string;
beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'oscar-cold-'));
  stubs = join(work, 'bin');
  cache = join(work, 'cache');
  await mkdir(stubs);
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

const isRoot = process.getuid?.() === 0;

describe('hack/node-root/build.sh', () => {
  // Building a root needs root (debootstrap); CI runs as root, so there this is never skipped.
  const rootOnly = isRoot || process.env.CI === 'true' ? it : it.skip;

  rootOnly(
    'a cold build exits 0 and prints the root; a warm run prints the same root',
    async () => {
      // debootstrap SUITE TARGET MIRROR: make the smallest tree customize() can work on.
      await stub(
        stubs,
        'debootstrap',
        `target="\${@: -2:1}"; mkdir -p "$target/etc" "$target/var/lib/dbus" "$target/var/cache/apt/archives" "$target/var/lib/apt/lists"; echo "$*" >"$target/.args"`,
      );
      const env = { PATH: `${stubs}:${process.env.PATH ?? ''}`, OSCAR_CACHE: cache };
      const cold = await run('node-root/build.sh', env);
      expect(cold.stderr).toContain('node-root: built in');
      expect(cold.code).toBe(0);
      const root = cold.stdout.trim();
      expect(root.startsWith(join(cache, 'node-root', 'bookworm-'))).toBe(true);
      expect(existsSync(join(root, '.oscar-complete'))).toBe(true);
      expect(await readFile(join(root, 'etc/cloud/cloud.cfg.d/91-oscar-locale.cfg'), 'utf8')).toBe(
        'locale: C.UTF-8\n',
      );
      // No build directory or log is left behind.
      expect(
        (await readdir(join(cache, 'node-root'))).filter((f) => f.startsWith('.building')),
      ).toEqual([]);

      const warm = await run('node-root/build.sh', env);
      expect(warm.code).toBe(0);
      expect(warm.stdout.trim()).toBe(root);
      expect(warm.stderr).toBe('');
    },
  );

  rootOnly(
    'a failing debootstrap fails the build with its last lines, and leaves no root',
    async () => {
      await stub(stubs, 'debootstrap', 'echo "E: Couldn\'t download packages: cloud-init"; exit 1');
      const env = { PATH: `${stubs}:${process.env.PATH ?? ''}`, OSCAR_CACHE: cache };
      const r = await run('node-root/build.sh', env);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('debootstrap failed');
      expect(r.stderr).toContain("Couldn't download packages");
      expect(r.stdout).toBe('');
      const left = await readdir(join(cache, 'node-root'));
      expect(left.filter((f) => f.startsWith('bookworm-'))).toEqual([]);
      expect(left.filter((f) => f.startsWith('.building') && !f.endsWith('.log'))).toEqual([]);
    },
  );
});

describe('hack/testenv/build.sh', () => {
  // go build -ldflags … -o OUT PKG: write a small executable where the binary would go.
  const fakeGo = `
if [[ \${1:-} == build ]]; then
  out=; while [[ $# -gt 0 ]]; do [[ $1 == -o ]] && out=$2; shift; done
  printf '#!/bin/sh\\necho stub\\n' >"$out"; chmod +x "$out"; exit 0
fi
echo "unexpected go $*" >&2; exit 2`;

  it('a cold build exits 0 and prints the bin directory; a warm run returns it at once', async () => {
    await stub(stubs, 'go', fakeGo);
    const env = { PATH: `${stubs}:${process.env.PATH ?? ''}`, OSCAR_CACHE: cache };
    const cold = await run('testenv/build.sh', env);
    expect(cold.stderr).toContain('build.sh: built in');
    expect(cold.code).toBe(0);
    const bin = cold.stdout.trim();
    expect(bin.startsWith(join(cache, 'testenv', 'kube-v'))).toBe(true);
    for (const b of ['kube-apiserver', 'kube-controller-manager', 'kubectl', 'etcd']) {
      expect(existsSync(join(bin, b))).toBe(true);
    }

    const warm = await run('testenv/build.sh', env);
    expect(warm.code).toBe(0);
    expect(warm.stdout.trim()).toBe(bin);
    expect(warm.stderr).toBe('');
  });

  it('--node adds kubelet, kubeadm and kube-scheduler to the same bin directory, building only those', async () => {
    await stub(stubs, 'go', `echo "$*" >>"\${GO_LOG}"\n${fakeGo}`);
    const log = join(work, 'go.log');
    const env = { PATH: `${stubs}:${process.env.PATH ?? ''}`, OSCAR_CACHE: cache, GO_LOG: log };
    const plane = await run('testenv/build.sh', env);
    expect(plane.code).toBe(0);
    await writeFile(log, '');
    const node = await run('testenv/build.sh', env, ['--node']);
    expect(node.code).toBe(0);
    expect(node.stdout).toBe(plane.stdout);
    const bin = node.stdout.trim();
    for (const b of ['kube-apiserver', 'kubectl', 'etcd', 'kubelet', 'kubeadm', 'kube-scheduler']) {
      expect(existsSync(join(bin, b)), b).toBe(true);
    }
    const built = (await readFile(log, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => l.split(' ').pop());
    expect(built).toEqual([
      'k8s.io/kubernetes/cmd/kubelet',
      'k8s.io/kubernetes/cmd/kubeadm',
      'k8s.io/kubernetes/cmd/kube-scheduler',
    ]);
    const warm = await run('testenv/build.sh', env, ['--node']);
    expect(warm.stderr).toBe('');
    expect(warm.stdout).toBe(plane.stdout);
    const bad = await run('testenv/build.sh', env, ['--nodes']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('usage: build.sh [--node]');
  });

  it('a failing go build fails the script and leaves no bin directory', async () => {
    await stub(stubs, 'go', 'echo "compile error" >&2; exit 1');
    const env = { PATH: `${stubs}:${process.env.PATH ?? ''}`, OSCAR_CACHE: cache };
    const r = await run('testenv/build.sh', env);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('compile error');
    expect(r.stdout).toBe('');
    const [out] = await readdir(join(cache, 'testenv'));
    expect(out).toBeDefined();
    expect(existsSync(join(cache, 'testenv', out ?? '', 'bin'))).toBe(false);
    expect(
      (await readdir(join(cache, 'testenv', out ?? ''))).filter((f) => f.startsWith('.tmp')),
    ).toEqual([]);
  });
});

describe('hack/capi/build.sh', () => {
  // go build … -o OUT PKG writes a small executable; go list -m -f {{.Dir}} MODULE names a module
  // directory with the CRDs where the real module zip carries them.
  const fakeGo = (moduleDir: string): string => `
case \${1:-} in
  build) out=; while [[ $# -gt 0 ]]; do [[ $1 == -o ]] && out=$2; shift; done
         printf '#!/bin/sh\\necho stub\\n' >"$out"; chmod +x "$out"; exit 0 ;;
  list) echo "${moduleDir}"; exit 0 ;;
esac
echo "unexpected go $*" >&2; exit 2`;

  it('a cold build exits 0 and prints the directory with bin/manager and crds/; a warm run returns it at once', async () => {
    const moduleDir = join(work, 'cluster-api');
    await mkdir(join(moduleDir, 'config', 'crd', 'bases'), { recursive: true });
    await writeFile(
      join(moduleDir, 'config', 'crd', 'bases', 'cluster.x-k8s.io_machines.yaml'),
      'kind: CustomResourceDefinition\n',
    );
    await stub(stubs, 'go', fakeGo(moduleDir));
    const env = { PATH: `${stubs}:${process.env.PATH ?? ''}`, OSCAR_CACHE: cache };
    const cold = await run('capi/build.sh', env);
    expect(cold.stderr).toContain('build.sh: built in');
    expect(cold.code).toBe(0);
    const out = cold.stdout.trim();
    expect(out.startsWith(join(cache, 'capi', 'cluster-api-v1.'))).toBe(true);
    expect(existsSync(join(out, 'bin', 'manager'))).toBe(true);
    expect(await readFile(join(out, 'crds', 'cluster.x-k8s.io_machines.yaml'), 'utf8')).toBe(
      'kind: CustomResourceDefinition\n',
    );
    expect((await readdir(out)).filter((f) => f.startsWith('.tmp'))).toEqual([]);

    const warm = await run('capi/build.sh', env);
    expect(warm.code).toBe(0);
    expect(warm.stdout.trim()).toBe(out);
    expect(warm.stderr).toBe('');
  });

  it('a failing go build fails the script and leaves no manager behind', async () => {
    await stub(stubs, 'go', 'echo "compile error" >&2; exit 1');
    const env = { PATH: `${stubs}:${process.env.PATH ?? ''}`, OSCAR_CACHE: cache };
    const r = await run('capi/build.sh', env);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('compile error');
    expect(r.stdout).toBe('');
    const [out] = await readdir(join(cache, 'capi'));
    expect(existsSync(join(cache, 'capi', out ?? '', 'bin'))).toBe(false);
    expect(
      (await readdir(join(cache, 'capi', out ?? ''))).filter((f) => f.startsWith('.tmp')),
    ).toEqual([]);
  });

  it('a module without CRDs fails the script: the suite needs them', async () => {
    await stub(stubs, 'go', fakeGo(join(work, 'empty-module')));
    const r = await run('capi/build.sh', {
      PATH: `${stubs}:${process.env.PATH ?? ''}`,
      OSCAR_CACHE: cache,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('carries no config/crd/bases');
  });

  it('exits 3 (a missing tool) without go on PATH', async () => {
    const r = await run('capi/build.sh', { PATH: '/usr/bin:/bin', OSCAR_CACHE: cache });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("'go' is not on PATH");
  });
});

describe('hack/deps.sh', () => {
  // dpkg-query and apt-get over a file that lists the "installed" packages, one "name version" a line.
  async function fakeDpkg(db: string, aptBody: string): Promise<void> {
    await stub(
      stubs,
      'dpkg-query',
      `
fmt=; [[ \${1:-} == -W ]] && shift; [[ \${1:-} == -f* ]] && { fmt=\${1#-f}; [[ -z $fmt ]] && { shift; fmt=$1; }; shift; }
pkg=$1
line=$(awk -v p="$pkg" '$1 == p' "${db}")  # literally: package names hold regex characters (libstdc++6)
[[ -n $line ]] || exit 1
case $fmt in
  *Status*) printf installed ;;
  *Version*) printf '%s' "\${line#* }" ;;
esac`,
    );
    await stub(stubs, 'apt-get', aptBody);
  }
  const aptThatInstalls = (db: string, log: string): string => `
echo "apt-get $*" >>"${log}"
[[ " $* " == *" update "* ]] && exit 0
for a in "$@"; do
  case $a in -*|install|Dpkg::*|DPkg::*) ;; *=*) echo "\${a%%=*} \${a#*=}" >>"${db}" ;; *) echo "$a 1.0" >>"${db}" ;; esac
done`;

  const requireRoot = isRoot ? it : it.skip;

  requireRoot(
    'installs what is missing and exits 0; with everything there it runs no apt-get',
    async () => {
      const db = join(work, 'dpkg-db');
      const log = join(work, 'apt.log');
      await writeFile(db, 'systemd 252.99\n');
      await fakeDpkg(db, aptThatInstalls(db, log));
      const env = { PATH: `${stubs}:${process.env.PATH ?? ''}` };
      const cold = await run('deps.sh', env);
      expect(cold.stderr).toContain('hack/deps.sh: installing');
      expect(cold.code).toBe(0);
      const calls = await readFile(log, 'utf8');
      expect(calls).toMatch(/update/);
      expect(calls).toContain('systemd-container=252.99');

      await rm(log);
      const warm = await run('deps.sh', env);
      expect(warm.code).toBe(0);
      expect(warm.stderr).toBe('');
      expect(existsSync(log)).toBe(false);
    },
  );

  requireRoot('fails naming the package when apt-get skipped one', async () => {
    const db = join(work, 'dpkg-db');
    const log = join(work, 'apt.log');
    await writeFile(db, 'systemd 252.99\n');
    // Installs everything but shellcheck.
    await fakeDpkg(
      db,
      aptThatInstalls(db, log).replace('*) echo "$a 1.0"', 'shellcheck) ;; *) echo "$a 1.0"'),
    );
    const r = await run('deps.sh', { PATH: `${stubs}:${process.env.PATH ?? ''}` });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('shellcheck still not installed');
  });
});

describe('hack/images/build.sh', () => {
  // apt-cache names a busybox-static version, apt-get downloads a "deb", dpkg-deb unpacks a
  // stand-in busybox, and buildah records its calls and writes each pushed archive: the script's
  // own steps (recipe hash, lock, temporary directory, refs, the move into place) run for real.
  async function standIns(buildahPush = 'printf "archive %s\\n" "$ref" >"$path"'): Promise<string> {
    const log = join(work, 'buildah.log');
    await stub(stubs, 'apt-cache', 'echo "busybox-static:"; echo "  Candidate: 1:1.99.0-1"');
    await stub(
      stubs,
      'apt-get',
      `[[ \${1:-} == download ]] || { echo "unexpected apt-get $*" >&2; exit 2; }
touch "busybox-static_1.99.0-1_amd64.deb"`,
    );
    await stub(
      stubs,
      'dpkg-deb',
      `[[ $1 == -x ]] || exit 2; mkdir -p "$3/bin"; printf '#!/bin/sh\\n' >"$3/bin/busybox"`,
    );
    await stub(
      stubs,
      'buildah',
      `echo "$*" >>"${log}"
while [[ \${1:-} == --* ]]; do shift 2; done
case $1 in
  from) echo "container-1" ;;
  push) target=\${@: -1}; rest=\${target#docker-archive:}; path=\${rest%%:*}; ref=\${rest#*:}
        ${buildahPush} ;;
esac`,
    );
    return log;
  }

  it('a cold build exits 0 and prints the directory with both archives and their refs; a warm run returns it at once', async () => {
    const log = await standIns();
    const env = { PATH: `${stubs}:${process.env.PATH ?? ''}`, OSCAR_CACHE: cache };
    const cold = await run('images/build.sh', env);
    expect(cold.stderr).toContain('images: built in');
    expect(cold.code).toBe(0);
    const out = cold.stdout.trim();
    expect(out).toMatch(new RegExp(`^${join(cache, 'images')}/[0-9a-f]{12}$`));
    const tag = out.split('/').pop() ?? '';
    expect(await readFile(join(out, 'refs'), 'utf8')).toBe(
      `busybox.tar localhost/oscar/busybox:${tag}\npause.tar localhost/oscar/pause:${tag}\n`,
    );
    expect(await readFile(join(out, 'pause.tar'), 'utf8')).toBe(
      `archive localhost/oscar/pause:${tag}\n`,
    );
    expect(existsSync(join(out, '.complete'))).toBe(true);
    const calls = await readFile(log, 'utf8');
    expect(calls).toContain('--storage-driver vfs'); // no overlay mounts left behind
    expect(calls).toMatch(/config --entrypoint \["\/bin\/sh", "-c", "trap/); // the pause loop
    expect((await readdir(join(cache, 'images'))).filter((f) => f.startsWith('.building'))).toEqual(
      [],
    );

    await rm(log);
    const warm = await run('images/build.sh', env);
    expect(warm.code).toBe(0);
    expect(warm.stdout.trim()).toBe(out);
    expect(warm.stderr).toBe('');
    expect(existsSync(log)).toBe(false); // buildah not called again
  });

  it('a failing buildah push fails the script and leaves no image directory', async () => {
    await standIns('echo "push: no space left" >&2; exit 1');
    const r = await run('images/build.sh', {
      PATH: `${stubs}:${process.env.PATH ?? ''}`,
      OSCAR_CACHE: cache,
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('no space left');
    expect(r.stdout).toBe('');
    expect((await readdir(join(cache, 'images'))).filter((f) => !f.startsWith('.'))).toEqual([]);
    expect((await readdir(join(cache, 'images'))).filter((f) => f.startsWith('.building'))).toEqual(
      [],
    );
  });

  it('fails naming the fix when apt knows no busybox-static', async () => {
    await standIns();
    await stub(stubs, 'apt-cache', 'echo "busybox-static:"; echo "  Candidate: (none)"');
    const r = await run('images/build.sh', {
      PATH: `${stubs}:${process.env.PATH ?? ''}`,
      OSCAR_CACHE: cache,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('apt knows no busybox-static (run apt-get update)');
  });
});
