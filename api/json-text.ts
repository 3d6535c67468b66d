/**
 * JSON.parse for input oscar does not control (a Secret's payload, a watch event, a state file):
 * V8's syntax errors quote the input around the fault (`Unexpected token 'S', "{"a":tSECR"... is
 * not valid JSON`), and such a message goes on into logs and a node's report — a Secret's bytes
 * must reach neither. The error here keeps V8's message only when it quotes nothing of the input,
 * else says where the fault is as far as V8 tells, without the excerpt.
 */

/** V8 messages that carry a position and no excerpt of the input. */
const WITHOUT_EXCERPT =
  /^(Unexpected end of JSON input|[^"]* in JSON at position \d+( \(line \d+ column \d+\))?)$/;

/** The input is not JSON; the message holds no byte of it. */
export class JsonSyntaxError extends Error {
  override name = 'JsonSyntaxError';
}

/** The message of a JSON.parse failure with any excerpt of the input left out. */
export function quietJsonMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  if (WITHOUT_EXCERPT.test(message)) return message;
  return 'an unexpected character (the excerpt V8 quotes is left out: the input may be secret)';
}

/** JSON.parse(text), throwing JsonSyntaxError without an excerpt of `text`. */
export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    // no cause: V8's own error carries the excerpt
    throw new JsonSyntaxError(quietJsonMessage(error));
  }
}
