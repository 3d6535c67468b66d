/**
 * The renderers' public surface, for the controller, the agent, the CLI and providers.
 * (renderers/webhook has its own entry for the HTTP protocol.)
 */
export type { RenderContext, RenderResult, Renderer } from './types.js';
export {
  RendererRegistry,
  defaultRegistry,
  renderOsc,
  renderDocument,
  selectRenderer,
  type RenderOptions,
  type RenderDocumentResult,
} from './registry.js';
export {
  expand,
  profileFor,
  PROFILES,
  GENERIC_PROFILE,
  containerdConfig,
  CONTAINERD_CONFIG_PATH,
  CONTAINERD_DROP_IN,
  CONTAINERD_UNIT,
  type Expanded,
  type OsProfile,
  type PackageManager,
} from './profiles.js';
export {
  builtinRenderer,
  cloudConfigRenderer,
  flatcarRenderer,
  genericRenderer,
  BUILTIN_RENDERERS,
} from './builtin.js';
export { FORMATS, renderFormat, decode, expectedOutcome, type FormatSpec } from './formats.js';
export { checkResolved, assertRenderable } from './guard.js';
export { effectiveEnable, planUnits, type UnitPlan } from './common.js';
export {
  decodeCloudConfig,
  decodeIgnition,
  decodeScript,
  comparable,
  DecodeError,
  type Decoded,
  type DecodedFile,
} from './decode.js';
export { explain, formatExplain, type ExplainRow } from './explain.js';
export { IGNITION_VERSION } from './ignition.js';
export { PROVISION_MARKER } from './script.js';
