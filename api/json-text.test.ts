import { describe, expect, it } from 'vitest';
import { JsonSyntaxError, parseJsonText } from './json-text.js';

describe('parseJsonText: hostile JSON (a Secret, a watch event, a state file)', () => {
  it('parses JSON as JSON.parse does (positive control)', () => {
    expect(parseJsonText('{"a":[1,"b"]}')).toEqual({ a: [1, 'b'] });
  });

  // V8 quotes up to ~10 characters either side of these faults ("Unexpected token …, "…" is not
  // valid JSON"): a watch line or a Secret's payload would reach the log and the node's report
  it.each([
    ['a bad literal', '{"data":tc2VjcmV0LXRva2Vu}'],
    ['a bad start', 'c2VjcmV0LXRva2Vu'],
    ['a bad value after a key', '{"data":"x","k":c2VjcmV0LXRva2Vu}'],
    ['a control character in a string', '{"data":"c2VjcmV0LXRva2Vu\u0007"}'],
    ['a cut-off line', '{"type":"MODIFIED","object":{"data":{"config.json":"c2VjcmV0LXRva2Vu'],
  ])('%s: the error names no byte of the input', (_, text) => {
    let error: unknown;
    try {
      parseJsonText(text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(JsonSyntaxError);
    expect((error as Error).message).not.toMatch(/c2Vj|cmV0|LXRv|VrZW|tc2/);
    expect((error as Error).cause).toBeUndefined();
  });

  it('keeps V8 messages that quote nothing, with their position', () => {
    expect(() => parseJsonText('{"a":1,}')).toThrow(/in JSON at position 7/);
    expect(() => parseJsonText('{"a":')).toThrow(/Unexpected end of JSON input/);
  });
});
