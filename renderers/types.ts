/**
 * The renderer contract. One interface for the built-in renderers, for renderers a provider
 * registers in code, and (through renderers/webhook) for renderers served over HTTP.
 */
import type { ResolvedConfig, ResolvedFile, ResolvedUnit } from '../api/resolved.js';
import type { Format, Purpose } from '../api/schema.js';

export interface RenderContext {
  /** The OperatingSystemConfig's name and namespace (for comments, guards, webhook requests). */
  name: string;
  namespace: string;
  purpose: Purpose;
  /** The format asked for: spec.format, a CLI flag, or the renderer's default. */
  format: Format;
  /** Compress the whole payload when the format allows it (cloud-config: gzip user-data). */
  gzip?: boolean;
}

export interface RenderResult {
  /** The user data, exactly as the machine will receive it. */
  userData: Buffer;
  format: Format;
  /** Units and files the OS profile added (containerd config, masked update services, …). */
  extraUnits: ResolvedUnit[];
  extraFiles: ResolvedFile[];
  /** Things an operator should know, such as a provision payload above 16 KiB. */
  warnings: string[];
}

export interface Renderer {
  /** The spec.type values this renderer serves, such as ["ubuntu", "debian"]. */
  readonly types: readonly string[];
  /** Formats it can produce; the first is the default. */
  readonly formats: readonly Format[];
  render(config: ResolvedConfig, context: RenderContext): Promise<RenderResult>;
}
