import { describe, expect, it } from 'vitest';
import { AGENT_EXEC_ARGV, seaConfig } from './build.js';

describe('the executables start with their flags', () => {
  it("the agent with its V8 settings (cli/memory.ts), before V8 starts; oscar with Node's own", () => {
    expect(seaConfig('agent').execArgv).toEqual([...AGENT_EXEC_ARGV]);
    expect(AGENT_EXEC_ARGV).toEqual(
      expect.arrayContaining([
        '--no-maglev',
        '--no-turbofan',
        '--optimize-for-size',
        '--bytecode-old-age=1',
        '--flush-baseline-code',
      ]),
    );
    expect(seaConfig('oscar')).not.toHaveProperty('execArgv');
  });
});
