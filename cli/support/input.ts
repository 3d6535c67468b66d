/**
 * Reading the files the commands are given, with `-` for stdin as kubectl, butane and terraform
 * take it: `kubectl get osc x -o yaml | oscar validate -f -`. Stdin can be read once per process.
 */
import { readFile } from 'node:fs/promises';

export const STDIN = '-';

/** Streams already read: stdin has one content, so a second `-` is an error, not an empty file. */
const taken = new WeakSet<NodeJS.ReadableStream>();

/** The name errors and notes give the file: `<stdin>` for `-`. */
export function displayName(path: string): string {
  return path === STDIN ? '<stdin>' : path;
}

async function readStream(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) {
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The text of `path`, or of stdin for `-`; errors say which and why. */
export async function readInput(
  path: string,
  stdin: NodeJS.ReadableStream = process.stdin,
): Promise<string> {
  if (path !== STDIN) return readFile(path, 'utf8');
  if (taken.has(stdin)) throw new Error('stdin ("-") can be read only once; name it once');
  taken.add(stdin);
  return readStream(stdin);
}

/**
 * The one file of a command that takes it either way, `oscar render FILE` or `-f FILE` (as
 * `validate` does): both, or neither, is an error that says how to name it.
 */
export function oneFile(
  command: string,
  positional: string | undefined,
  flag: string | undefined,
): string {
  if (positional !== undefined && flag !== undefined && positional !== flag) {
    throw new Error(
      `two files given ("${flag}" with -f and "${positional}"); ${command} reads one: name it once`,
    );
  }
  const file = flag ?? positional;
  if (file === undefined) {
    throw new Error(`no file given: oscar ${command} FILE, or -f FILE ("-" reads stdin)`);
  }
  return file;
}
