/** Whole-number flags: checked by the flag's name, with the fix in the message. */

/**
 * `value` as a whole number of at least 1; otherwise an error naming `flag`, what it got and an
 * example (`what` says what the number counts, for the message).
 */
export function parsePositiveInteger(value: string, flag: string, what: string): number {
  const trimmed = value.trim();
  const n = /^\d+$/.test(trimmed) ? Number(trimmed) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new Error(
      `${flag}: "${value}" is not a positive integer; give the number of ${what}, such as 2`,
    );
  }
  return n;
}
