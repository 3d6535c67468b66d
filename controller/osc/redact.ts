/**
 * Keeps the data of an OSC's referenced Secrets out of what it says about a failed render. A
 * renderer's refusal or error (a webhook's RenderError, an exception) goes into the OSC's status,
 * its Warning Event and the controller's log, which a namespace reader sees without being allowed
 * to read Secrets; a renderer that echoes what it was sent ("cannot parse line: password=…", the
 * file's base64) would copy a Secret there. Every occurrence of a referenced Secret's value — whole,
 * base64-encoded, or any line of it long enough to be more than noise — is replaced.
 */
const REDACTED = '[redacted: data of a referenced Secret]';
/** Shorter lines ("", "}", "fi") say nothing and would redact ordinary words. */
const MIN_LINE = 6;

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The strings to hide for one Secret value: whole, base64, and its longer lines, longest first. */
function needles(value: Buffer): string[] {
  const text = value.toString('utf8');
  const out = new Set<string>();
  if (text.trim().length >= MIN_LINE) out.add(text);
  if (value.length >= MIN_LINE) out.add(value.toString('base64'));
  for (const line of text.split(/\r?\n/)) {
    const trimmed = line.trim();
    if (trimmed.length >= MIN_LINE) out.add(trimmed);
  }
  return [...out].sort((a, b) => b.length - a.length);
}

/** `message` with every value of `secrets` (key → data, per referenced Secret) replaced. */
export function redactSecretData(
  message: string,
  secrets: ReadonlyMap<string, Readonly<Record<string, Buffer>>>,
): string {
  let out = message;
  for (const data of secrets.values()) {
    for (const value of Object.values(data)) {
      for (const needle of needles(value)) {
        if (out.includes(needle)) out = out.replace(new RegExp(escape(needle), 'g'), REDACTED);
      }
    }
  }
  return out;
}
