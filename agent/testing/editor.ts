/** How editors save, for the tests of what reads a file being saved. */
import { open } from 'node:fs/promises';

/** Truncates, writes the first part, pauses `pauseMs`, then writes the rest (one open file). */
export async function saveInTwoParts(
  path: string,
  first: string,
  rest: string,
  pauseMs: number,
): Promise<void> {
  const handle = await open(path, 'w');
  try {
    await handle.write(first);
    await new Promise((r) => setTimeout(r, pauseMs));
    await handle.write(rest);
  } finally {
    await handle.close();
  }
}
