import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  defaultLogFormat,
  errorFields,
  openLogger,
  parseLogFormat,
  parseLogLevel,
  shortChecksum,
} from './logger.js';
import { memoryLogger } from './memory.js';

describe('the logging convention', () => {
  it('writes one JSON record a line: ISO time, level as a word, component, msg, fields', () => {
    const { log, records } = memoryLogger('agent', 'debug');
    log.info({ checksum: 'abc123def456', durationMs: 12 }, 'applied');
    log.debug('detail');
    const [first, second] = records();
    expect(Object.keys(first ?? {}).sort()).toEqual(
      ['checksum', 'component', 'durationMs', 'level', 'msg', 'time'].sort(),
    );
    expect(first).toMatchObject({
      level: 'info',
      component: 'agent',
      msg: 'applied',
      checksum: 'abc123def456',
    });
    expect(String(first?.time)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(second).toMatchObject({ level: 'debug', msg: 'detail' });
  });

  it('redacts object data should a whole object be logged by mistake', () => {
    const { log, lines } = memoryLogger('controller');
    log.info(
      {
        secret: { data: { token: 'c2VjcmV0' }, stringData: { t: 'secret' } },
        body: 'the request',
        osc: { spec: { files: [{ content: 'x' }] } },
      },
      'oops',
    );
    const text = lines.join('');
    expect(text).not.toContain('c2VjcmV0');
    expect(text).not.toMatch(/"secret"[^}]*"t":"secret"/);
    expect(text).not.toContain('the request');
    expect(text).toContain('[redacted]');
  });

  it('is JSON in a pod and off a terminal, text on a terminal', () => {
    expect(defaultLogFormat({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, true)).toBe('json');
    expect(defaultLogFormat({}, false)).toBe('json');
    expect(defaultLogFormat({}, true)).toBe('text');
  });

  it('the text form is one readable line a record', async () => {
    const lines: string[] = [];
    const log = await openLogger({
      component: 'agent',
      format: 'text',
      destination: new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(chunk.toString('utf8'));
          done();
        },
      }),
    });
    log.warn({ checksum: 'abc123def456' }, 'apply failed');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: agent: apply failed \{"checksum":"abc123def456"\}\n$/,
    );
  });

  // red-team round 3: a path may hold a tab or a newline (legal), and a drifted file's name is
  // chosen by whoever made it; logging one must not forge a record nor reach the terminal raw
  it.each(['json', 'text'] as const)(
    'a path with a newline, CR or escape sequence stays inside its one %s record',
    async (format) => {
      const lines: string[] = [];
      const log = await openLogger({
        component: 'agent',
        format,
        destination: new Writable({
          write(chunk: Buffer, _encoding, done) {
            lines.push(chunk.toString('utf8'));
            done();
          },
        }),
      });
      const path =
        '/tmp/a\n{"level":"error","msg":"forged"}\r\u001b[2KERROR: forged\tz\u009b\u007f';
      log.info({ path }, `wrote ${path}`);
      expect(lines).toHaveLength(1);
      const body = (lines[0] ?? '').replace(/\n$/, '');
      // no C0 control (newline, CR, ESC) in either; C1 and DEL, which JSON leaves as they are,
      // cannot be in a declared path (api/visible-text.ts) and are escaped in the text's message
      expect(Buffer.from(body).some((byte) => byte < 0x20)).toBe(false);
      if (format === 'text') expect(body).toContain('forged\\tz\\u009b\\u007f {');
      if (format === 'text') expect(body).toContain('/tmp/a\\n{"level"');
      if (format === 'json') expect((JSON.parse(body) as { path: string }).path).toBe(path);
    },
  );

  it('checks its flags, naming the choices', () => {
    expect(parseLogFormat('text')).toBe('text');
    expect(() => parseLogFormat('xml')).toThrow('--log-format must be one of json, text');
    expect(parseLogLevel('warn')).toBe('warn');
    expect(() => parseLogLevel('loud')).toThrow('--log-level must be one of trace, debug');
    expect(errorFields(new TypeError('bad'))).toEqual({ err: 'bad', errName: 'TypeError' });
    expect(shortChecksum('a'.repeat(64))).toBe('a'.repeat(12));
  });
});
