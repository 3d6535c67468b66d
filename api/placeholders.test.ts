import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { OperatingSystemConfigSpec } from './schema.js';
import {
  escapePlaceholders,
  LITERAL_OPEN,
  parseValuePairs,
  substituteSpec,
  SUBSTITUTED_FIELD_MAX,
  substituteText,
  type PlaceholderContext,
} from './placeholders.js';

const context: PlaceholderContext = {
  machine: { name: 'm1', namespace: 'ns' },
  cluster: { name: 'c1' },
  apiServer: { url: 'https://10.0.0.1:6443' },
  values: { region: 'eu-west-1', rack_id: '7', empty: '' },
};

function text(t: string, ctx = context, unit = false): string {
  const r = substituteText(t, ctx, { unit });
  if (!r.ok) throw new Error(r.message);
  return r.text;
}

function failure(t: string, ctx = context, unit = false): string {
  const r = substituteText(t, ctx, { unit });
  if (r.ok) throw new Error(`expected a failure for ${JSON.stringify(t)}, got ${r.text}`);
  return r.message;
}

const valueKey = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_-]{0,20}$/);

describe('substituteText', () => {
  it('substitutes every known name, with or without spaces inside the braces', () => {
    expect(
      text(
        'name={{ machine.name }} ns={{machine.namespace}} c={{  cluster.name }} url={{ apiServer.url}} r={{ values.region }}/{{ values.rack_id }}',
      ),
    ).toBe('name=m1 ns=ns c=c1 url=https://10.0.0.1:6443 r=eu-west-1/7');
  });

  it('keeps a literal "{{" written as {{ "{{" }}, and a lone "}}" as it is', () => {
    expect(text(`a ${LITERAL_OPEN} .Values }} b }}`)).toBe('a {{ .Values }} b }}');
    expect(text('{{{ values.rack_id }}}')).toBe('{7}');
  });

  it('an empty value is a value; a missing one is an error naming the key and what is given', () => {
    expect(text('[{{ values.empty }}]')).toBe('[]');
    expect(failure('x\ny {{ values.zone }}')).toBe(
      'line 2: {{ values.zone }}: no value "zone" is given; add it to the OscarConfig\'s spec.values (or --values zone=…); given: empty, rack_id, region',
    );
  });

  it('refuses unknown names, expressions and unclosed braces, saying how to write a literal "{{"', () => {
    expect(failure('{{ machine.uid }}')).toMatch(/unknown placeholder; known: machine\.name/);
    expect(failure('{{ .Values.x }}')).toMatch(/is not a placeholder.*\{\{ "\{\{" \}\}/);
    expect(failure('{{ values.a | upper }}')).toMatch(/is not a placeholder/);
    expect(failure('{{ range .x }}')).toMatch(/is not a placeholder/);
    expect(failure('a\nb\nc {{ values.region')).toMatch(/^line 3: "\{\{" without a closing "\}\}"/);
    expect(failure('{{ values.region\n}}')).toMatch(/without a closing/);
  });

  it('a placeholder without a value in this context is an error (cluster.name says where it comes from)', () => {
    expect(failure('{{ cluster.name }}', { values: {} })).toMatch(/--cluster-name/);
    expect(failure('{{ machine.name }}', {})).toMatch(/has no value here/);
  });

  it('in a unit, a value may not bring a new line or a control character', () => {
    const ctx = { values: { evil: 'x\nExecStartPre=/bin/rm -rf /', bell: 'a\u0007', tab: 'a\tb' } };
    expect(failure('ExecStart=/bin/echo {{ values.evil }}', ctx, true)).toMatch(
      /one line without control characters/,
    );
    expect(failure('{{ values.bell }}', ctx, true)).toMatch(/control characters/);
    expect(text('{{ values.tab }}', ctx, true)).toBe('a\tb');
    // In a file any bytes are content.
    expect(text('{{ values.evil }}', ctx)).toBe(ctx.values.evil);
  });

  it('property: text without "{{" comes back unchanged (the same string)', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme' }).filter((s) => !s.includes('{{')),
        (s) => {
          const r = substituteText(s, context);
          expect(r.ok && r.text).toBe(s);
        },
      ),
    );
  });

  it('property: any text escaped with escapePlaceholders substitutes back to itself', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (s) => {
        expect(text(escapePlaceholders(s), {})).toBe(s);
      }),
    );
  });

  it('property: values are inserted verbatim and never scanned again (no code runs, nothing expands twice)', () => {
    fc.assert(
      fc.property(
        fc.dictionary(valueKey, fc.string({ maxLength: 40 }), { minKeys: 1, maxKeys: 5 }),
        fc.array(fc.string({ maxLength: 10 }).map(escapePlaceholders), { maxLength: 6 }),
        (values, literals) => {
          const keys = Object.keys(values);
          let template = '';
          let expected = '';
          literals.forEach((lit, i) => {
            const key = keys[i % keys.length] ?? '';
            template += `${lit}{{ values.${key} }}`;
            expected += `${text(lit, {})}${values[key] ?? ''}`;
          });
          expect(text(template, { values })).toBe(expected);
        },
      ),
    );
  });

  it('property: a value holding placeholder syntax stays literal', () => {
    fc.assert(
      fc.property(fc.constantFrom('{{ machine.name }}', '{{', '{{ "{{" }}', '}}{{x'), (v) => {
        expect(text('<{{ values.v }}>', { values: { v }, machine: context.machine })).toBe(
          `<${v}>`,
        );
      }),
    );
  });

  it('property: a "{{" not followed by a valid placeholder never passes silently', () => {
    fc.assert(
      fc.property(
        fc
          .string({ maxLength: 30 })
          .filter(
            (s) =>
              !/^\s*("\{\{"|[A-Za-z][A-Za-z0-9]*(\.[A-Za-z_][A-Za-z0-9_-]*)+)\s*$/.test(s) &&
              !s.includes('}}'),
          ),
        (inner) => {
          expect(substituteText(`a{{${inner}}}b`, context).ok).toBe(false);
        },
      ),
    );
  });
});

describe('substituteSpec', () => {
  const spec: OperatingSystemConfigSpec = {
    type: 'ubuntu',
    purpose: 'provision',
    files: [
      { path: '/etc/a', content: { inline: { data: 'host={{ machine.name }}\n' } } },
      { path: '/etc/b', content: { inline: { encoding: 'b64', data: 'e3sgeCB9fQ==' } } },
      { path: '/etc/c', content: { secretRef: { name: 's', key: 'k' } } },
    ],
    units: [
      {
        name: 'a.service',
        content: '[Service]\nEnvironment=REGION={{ values.region }}\n',
        dropIns: [{ name: 'x.conf', content: '[Service]\nEnvironment=C={{ cluster.name }}\n' }],
      },
    ],
  };

  it('substitutes plain inline files, units and drop-ins; leaves base64 files and references alone', () => {
    const r = substituteSpec(spec, context);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.spec.files?.[0]?.content.inline?.data).toBe('host=m1\n');
    expect(r.spec.files?.[1]).toBe(spec.files?.[1]);
    expect(r.spec.files?.[2]).toBe(spec.files?.[2]);
    expect(r.spec.units?.[0]?.content).toBe('[Service]\nEnvironment=REGION=eu-west-1\n');
    expect(r.spec.units?.[0]?.dropIns?.[0]?.content).toBe('[Service]\nEnvironment=C=c1\n');
    // The input is not modified.
    expect(spec.files?.[0]?.content.inline?.data).toBe('host={{ machine.name }}\n');
  });

  it('returns the same spec when there is nothing to substitute', () => {
    const plain: OperatingSystemConfigSpec = { type: 'ubuntu', purpose: 'provision', files: [] };
    const r = substituteSpec(plain, {});
    expect(r.ok && r.spec).toBe(plain);
  });

  it('reports every failing field by its path', () => {
    const r = substituteSpec(spec, { machine: context.machine });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path)).toEqual([
      'spec.units[0].content',
      'spec.units[0].dropIns[0].content',
    ]);
  });
});

describe('the kubeadm join placeholders', () => {
  const kubeadm: PlaceholderContext = {
    ...context,
    apiServer: { url: 'https://10.0.0.1:6443', caCertHash: 'sha256:abc' },
    bootstrap: { token: 'abcdef.0123456789abcdef' },
  };

  it('give the endpoint as host:port, the CA pin and the token', () => {
    expect(text('{{ apiServer.endpoint }} {{ apiServer.caCertHash }}', kubeadm)).toBe(
      '10.0.0.1:6443 sha256:abc',
    );
    const r = substituteText('token: {{ bootstrap.token }}', kubeadm, { private: true });
    expect(r).toEqual({ ok: true, text: 'token: abcdef.0123456789abcdef' });
  });

  it('spell out the default port and brackets an IPv6 host; no https URL, no endpoint', () => {
    const at = (url: string) => substituteText('{{ apiServer.endpoint }}', { apiServer: { url } });
    expect(at('https://api.example.com')).toEqual({ ok: true, text: 'api.example.com:443' });
    expect(at('https://[fd00::1]:6443/')).toEqual({ ok: true, text: '[fd00::1]:6443' });
    expect(at('http://api:80').ok).toBe(false);
  });

  it('keep the token out of units and world-readable files, naming the fix', () => {
    expect(failure('t={{ bootstrap.token }}', kubeadm)).toMatch(
      /\{\{ bootstrap\.token \}\} is the machine's credential: put it only in a file that group and others cannot read \(permissions such as "0600"\)/,
    );
    expect(failure('t={{ bootstrap.token }}', kubeadm, true)).toMatch(/never in a unit/);
  });

  it('say who knows a value that is not given here', () => {
    expect(failure('{{ bootstrap.token }}', context)).toMatch(
      /only the bootstrap controller knows/,
    );
    expect(failure('{{ apiServer.caCertHash }}', context)).toMatch(/--bootstrap-ca/);
  });

  it('in a spec: the token only in a private file, and what was used is reported', () => {
    const file = (permissions: string) => ({
      type: 'ubuntu' as const,
      purpose: 'provision' as const,
      files: [
        {
          path: '/etc/kubernetes/join.yaml',
          permissions,
          content: { inline: { data: 'token: {{ bootstrap.token }}\n' } },
        },
      ],
    });
    const ok = substituteSpec(file('0600'), kubeadm);
    if (!ok.ok) throw new Error(JSON.stringify(ok.errors));
    expect(ok.spec.files?.[0]?.content.inline?.data).toBe('token: abcdef.0123456789abcdef\n');
    expect([...ok.used]).toEqual(['bootstrap.token']);
    const shared = substituteSpec(file('0640'), kubeadm);
    expect(!shared.ok && shared.errors.map((e) => e.path)).toEqual([
      'spec.files[0].content.inline.data',
    ]);
    const unit = substituteSpec(
      {
        type: 'ubuntu',
        purpose: 'provision',
        units: [{ name: 'a.service', content: 'X={{ machine.name }}{{ values.region }}' }],
      },
      context,
    );
    expect(unit.ok && [...unit.used].sort()).toEqual(['machine.name', 'values.region']);
  });
});

describe('parseValuePairs', () => {
  it('reads KEY=VALUE pairs; the value may hold "=" and be empty', () => {
    expect(parseValuePairs(['region=eu-west-1', 'args=a=b', 'empty='])).toEqual({
      region: 'eu-west-1',
      args: 'a=b',
      empty: '',
    });
  });
  it('refuses a pair without "=" or with a bad key, naming it', () => {
    expect(() => parseValuePairs(['region'])).toThrow(/--values "region": expected KEY=VALUE/);
    expect(() => parseValuePairs(['a b=c'])).toThrow(/KEY=VALUE/);
  });
});

describe('placeholders that multiply a value (red-team round 3)', () => {
  const value = 'v'.repeat(4096); // the CRD's longest value
  const many = (n: number) => '{{values.v}}'.repeat(n);

  it('a file of 100,000 placeholders naming a 4 KiB value (390 MiB) stops at 1 MiB, naming the field', () => {
    const r = substituteSpec(
      {
        type: 'ubuntu',
        purpose: 'provision',
        files: [{ path: '/etc/x', content: { inline: { data: many(100_000) } } }],
      },
      { values: { v: value } },
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors[0]?.path).toBe('spec.files[0].content.inline.data');
    expect(r.errors[0]?.message).toContain('passes 1.0 MiB');
  });

  it('many files each under 1 MiB stop once the spec passes 32 MiB together', () => {
    const files = Array.from({ length: 40 }, (_, i) => ({
      path: `/etc/x${String(i)}`,
      content: { inline: { data: many(250) } }, // 1,000 KiB each
    }));
    const r = substituteSpec(
      { type: 'ubuntu', purpose: 'provision', files },
      { values: { v: value } },
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors[0]?.path).toBe('spec.files[32].content.inline.data');
  });

  it('positive control: 200 placeholders of the 4 KiB value (800 KiB) substitute', () => {
    const r = substituteText(
      many(200),
      { values: { v: value } },
      { maxLength: SUBSTITUTED_FIELD_MAX },
    );
    expect(r.ok && r.text.length).toBe(200 * 4096);
  });
});
