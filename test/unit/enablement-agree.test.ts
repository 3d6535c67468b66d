/**
 * render --explain, the rendered user data and `oscar plan` make one decision per unit about
 * enablement (api/systemd/enablement.ts): the README's kubelet.service has no [Install] section,
 * and all three used to disagree about it (explain: "not enabled", plan: "enable … new").
 */
import { describe, expect, it } from 'vitest';
import { desiredFromText } from '../../agent/desired.js';
import { expandForOs } from '../../agent/local.js';
import { plan } from '../../agent/plan.js';
import { explain } from '../../renderers/explain.js';

const OSC = `apiVersion: oscar.dev/v1alpha1
kind: OperatingSystemConfig
metadata: { name: worker-reconcile }
spec:
  type: generic
  purpose: reconcile
  units:
    - name: kubelet.service
      content: |
        [Service]
        ExecStart=/usr/bin/kubelet
    - name: proxy.service
      content: |
        [Service]
        ExecStart=/usr/bin/proxy
        [Install]
        WantedBy=multi-user.target
    - name: getty@.service
      content: |
        [Service]
        ExecStart=/sbin/agetty %I
        [Install]
        WantedBy=multi-user.target
    - name: chronyd.service
`;

describe('one decision for enablement', () => {
  it('explain and plan enable the same units, and explain says why the others are not', async () => {
    const desired = await desiredFromText(OSC, 'osc.yaml', expandForOs);
    const rows = explain(desired.config, {
      name: 'worker-reconcile',
      namespace: 'default',
      purpose: 'reconcile',
      format: 'script',
    });
    const explained = rows
      .filter((r) => r.kind === 'unit' && /(^|, )enabled/.test(r.became))
      .map((r) => r.name)
      .sort();
    const planned = plan(undefined, desired.config, { files: new Map() })
      .filter((a) => a.kind === 'enable')
      .map((a) => (a as { unit: string }).unit)
      .sort();
    expect(planned).toEqual(['chronyd.service', 'proxy.service']);
    expect(explained).toEqual(planned);
    const kubelet = rows.find((r) => r.name === 'kubelet.service');
    expect(kubelet?.became).toContain('not enabled (no [Install] section with WantedBy=');
    const getty = rows.find((r) => r.name === 'getty@.service');
    expect(getty?.became).toContain('not enabled (a template without DefaultInstance=');
  });
});
