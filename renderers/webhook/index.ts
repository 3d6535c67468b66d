/** External renderers over HTTP: the protocol, the client Renderer, the server, the configuration. */
export {
  PROTOCOL_VERSION,
  RenderRequest,
  RenderResponse,
  RenderError,
  ProtocolError,
  decodeRequest,
  decodeResponse,
  encodeRequest,
  encodeResponse,
  encodeError,
  jsonSchemas,
} from './protocol.js';
export {
  RendererError,
  WebhookRenderer,
  type TransportCode,
  type WebhookRendererOptions,
} from './client.js';
export {
  createRendererApp,
  listen,
  parseListen,
  RENDER_PATH,
  type RunningServer,
} from './server.js';
export {
  CONFIGMAP_KEY,
  loadRenderersConfigFile,
  parseRenderersConfig,
  parseRenderersConfigMap,
  registryWithWebhooks,
  webhookRenderer,
  type WebhookEntry,
} from './config.js';
