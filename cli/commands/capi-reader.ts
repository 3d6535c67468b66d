/**
 * The Cluster API objects `oscar capi preview --machine-deployment` reads, from the API server:
 * gets and lists only. A ref's kind is found by discovery (the group's preferred version and the
 * resource serving that kind), as Cluster API finds a template by its contract.
 */
import { isNotFound, type KubeHttp } from '../../kube/client.js';
import type { CapiObject, CapiReader, Ref } from './capi-machines.js';

const CAPI = '/apis/cluster.x-k8s.io/v1beta2';
const LABEL_DEPLOYMENT = 'cluster.x-k8s.io/deployment-name';

interface ApiGroup {
  preferredVersion?: { groupVersion?: string };
}
interface ResourceList {
  resources?: { name: string; kind: string }[];
}

function ns(namespace: string): string {
  return `/namespaces/${encodeURIComponent(namespace)}`;
}

export class KubeCapiReader implements CapiReader {
  private readonly paths = new Map<string, Promise<string>>();

  constructor(private readonly http: KubeHttp) {}

  async machineDeployment(namespace: string, name: string): Promise<CapiObject> {
    try {
      return await this.http.request<CapiObject>(
        'GET',
        `${CAPI}${ns(namespace)}/machinedeployments/${encodeURIComponent(name)}`,
      );
    } catch (error) {
      if (isNotFound(error)) {
        throw new Error(
          `MachineDeployment ${namespace}/${name} not found (kubectl get machinedeployments -n ${namespace}; -n names the namespace)`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  machineSets(namespace: string, md: string): Promise<CapiObject[]> {
    return this.list(`${CAPI}${ns(namespace)}/machinesets`, md);
  }

  machines(namespace: string, md: string): Promise<CapiObject[]> {
    return this.list(`${CAPI}${ns(namespace)}/machines`, md);
  }

  async byRef(namespace: string, ref: Ref): Promise<CapiObject | undefined> {
    if (!ref.kind || !ref.name) return undefined;
    const base = await this.resourcePath(ref.apiGroup ?? '', ref.kind);
    try {
      return await this.http.request<CapiObject>(
        'GET',
        `${base.replace('{ns}', ns(namespace))}/${encodeURIComponent(ref.name)}`,
      );
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  private async list(path: string, md: string): Promise<CapiObject[]> {
    const list = await this.http.request<{ items?: CapiObject[] }>('GET', path, {
      query: { labelSelector: `${LABEL_DEPLOYMENT}=${md}` },
    });
    return list.items ?? [];
  }

  /** `/apis/<group>/<version>{ns}/<resource>` for a kind, found once per kind. */
  private resourcePath(group: string, kind: string): Promise<string> {
    const key = `${group}/${kind}`;
    let path = this.paths.get(key);
    if (!path) {
      path = this.discover(group, kind);
      this.paths.set(key, path);
    }
    return path;
  }

  private async discover(group: string, kind: string): Promise<string> {
    const where = `kind ${kind} of group ${group || '(core)'}`;
    let gv: string | undefined;
    try {
      const g = await this.http.request<ApiGroup>('GET', `/apis/${encodeURIComponent(group)}`);
      gv = g.preferredVersion?.groupVersion;
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    if (!gv) throw new Error(`the API server serves no ${where}: is its provider installed?`);
    const resources = await this.http.request<ResourceList>('GET', `/apis/${gv}`);
    const resource = resources.resources?.find((r) => r.kind === kind && !r.name.includes('/'));
    if (!resource) throw new Error(`the API server serves no ${where} in ${gv}`);
    return `/apis/${gv}{ns}/${resource.name}`;
  }
}
