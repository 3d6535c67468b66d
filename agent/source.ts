/** Where the agent's desired state comes from: a file (agent/source-file.ts) or its Secret. */
import type { Desired } from './state.js';

export interface SourceEvents {
  /** A new, verified desired state (only when its checksum differs from the last one). */
  onDesired(desired: Desired): void;
  /** The source could not produce a desired state (bad file, corrupted Secret, API down …). */
  onError(error: Error): void;
}

export interface Source {
  /** Starts following; the first desired state (if any) is delivered through onDesired. */
  start(events: SourceEvents): Promise<void>;
  stop(): Promise<void>;
  /** Short description for logs: "file /etc/oscar/config.yaml", "Secret ns/name". */
  readonly description: string;
}
