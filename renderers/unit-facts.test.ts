import { describe, expect, it } from 'vitest';
import { memoSize, unitFacts } from './unit-facts.js';

describe('unitFacts', () => {
  it('gives the syntax errors and the [Install] keys a unit text sets', () => {
    const facts = unitFacts(
      '[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\nbroken line\n[Install]\nWantedBy=multi-user.target\nAlias=y.service\n',
    );
    expect(facts.errors).toEqual([expect.objectContaining({ line: 5 })]);
    expect([...facts.install].sort()).toEqual(['Alias', 'WantedBy']);
    expect(unitFacts('[Service]\nExecStart=/bin/true\n').install.size).toBe(0);
  });

  it('parses a text once while it is remembered, an equal string from elsewhere included', () => {
    const text = '[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=a.target\n';
    const first = unitFacts(text);
    expect(unitFacts(text.slice(0, 10) + text.slice(10))).toBe(first);
  });

  it('stays within its bounds, forgetting the least recently used texts first', () => {
    const kept = '[Service]\nExecStart=/bin/kept\n';
    const facts = unitFacts(kept);
    const first = unitFacts('[Service]\nExecStart=/bin/x0\n');
    for (let i = 1; i < 3000; i++) {
      unitFacts(`[Service]\nExecStart=/bin/x${i}\n`);
      if (i % 100 === 0) unitFacts(kept); // used now and then: never the oldest
    }
    expect(memoSize().entries).toBe(1024);
    expect(unitFacts(kept)).toBe(facts);
    // not used since: forgotten, parsed again
    expect(unitFacts('[Service]\nExecStart=/bin/x0\n')).not.toBe(first);
  });

  it('does not keep a very long text', () => {
    const long = `[Service]\n${'Environment=A=1\n'.repeat(5000)}`;
    const before = memoSize().chars;
    unitFacts(long);
    expect(memoSize().chars).toBe(before);
    expect(unitFacts(long)).not.toBe(unitFacts(long));
  });
});
