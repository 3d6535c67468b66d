/**
 * What a name oscar writes on a node must look like to be what it reads as: the rules shared by
 * file paths (api/paths.ts) and drop-in names (api/systemd/unit-name.ts), in both layers of checks
 * (an OSC's and a resolved config's, which the agent and the renderers' guard run).
 */
/**
 * Characters that change what a terminal or a page shows instead of being shown: a carriage
 * return or backspace overwrites what came before, an escape sequence rewrites the screen, the
 * bidirectional overrides reorder the text ("Trojan source": U+202E shows `/etc/\u202Egnp.sh` as
 * `/etc/hs.png`), and Unicode's default-ignorable characters (zero-width space U+200B, soft hyphen
 * U+00AD, byte order mark U+FEFF, word joiner U+2060, Hangul fillers, variation selectors) are not
 * drawn at all, so `/etc/ssh/sshd_config\u200B` shows as the file sshd reads and is another; the
 * line and paragraph separators U+2028/U+2029 break a line where a reader sees none. With them a
 * path reads one way in `kubectl`, a drift report or a log line and is another on disk, and no
 * real path needs them. A tab and a newline stay legal: they show as what they are, and every
 * renderer and report quotes them (renderers/testdata/arbitraries.ts).
 */
const HIDDEN =
  // eslint-disable-next-line no-control-regex -- the control characters are what it finds
  /[\u0001-\u0008\u000b-\u001f\u007f-\u009f\p{Default_Ignorable_Code_Point}\p{Zl}\p{Zp}]/u;

/**
 * Half of a UTF-16 surrogate pair on its own (JSON may spell one: "\ud800"). No UTF-8 file name
 * holds one: Node writes U+FFFD in its place, so two declared paths that differ only there name
 * one file on disk, and the file written is not the path declared. (The API server's JSON decoder
 * already replaces them; a Secret's JSON, read by the agent, keeps them.)
 */
const LONE_SURROGATE = /\p{Cs}/u;

/** Anything outside ASCII: only such a path can have more than one Unicode form. */
// eslint-disable-next-line no-control-regex -- the range is what it finds
const NON_ASCII = /[^\u0000-\u007f]/;

function codeOf(ch: string): string {
  return (ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');
}

/** A message when `name` (a path, a drop-in name) has a character it may not, else undefined. */
export function hiddenCharacter(name: string): string | undefined {
  const surrogate = NON_ASCII.test(name) ? LONE_SURROGATE.exec(name) : null;
  if (surrogate) {
    return `contains a lone UTF-16 surrogate U+${codeOf(surrogate[0])} at position ${String(surrogate.index + 1)}, which no file name can hold (it would be written as U+FFFD): remove it, or write the whole character it was half of`;
  }
  const m = HIDDEN.exec(name);
  if (m) {
    return `contains the character U+${codeOf(m[0])} at position ${String(m.index + 1)}, which changes how the name displays (a terminal control, a text-direction override, or a character shown as nothing); remove it`;
  }
  return undefined;
}

/**
 * One path, one spelling: Unicode writes "é" as one code point (NFC) or as "e" and a combining
 * accent (NFD, what macOS file names use). Linux file systems compare bytes, so the two are two
 * files that display alike, and two declarations of "the same" path would both be written. The
 * composed form (NFC) is the one every Linux tool and keyboard produce.
 */
export function uncomposed(name: string): string | undefined {
  if (!NON_ASCII.test(name)) return undefined;
  const nfc = name.normalize('NFC');
  if (nfc === name) return undefined;
  return `is not in Unicode's composed form (NFC): it would name a different file than the same text typed on Linux; write "${nfc}"`;
}
