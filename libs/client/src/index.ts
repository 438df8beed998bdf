export {
  Latchkey,
  type Connection,
  type ConnectSessionCreated,
  type ConnectSessionInput,
  type ConnectionListItem,
  type EnvironmentVariable,
  type Integration,
  type IntegrationInput,
  type IntegrationListItem,
  type LatchkeyOptions,
  type MetadataResult,
  type Provider,
  type ProxyConfig,
  type ProxyGetConfig,
  type ProxyMethod,
  type ProxyMethodConfig,
  type ProxyParams,
  type ProxyResponse,
  type ProxyResponseData,
  type ProxyResponseType,
} from './client.js';
export { LatchkeyError, type LatchkeyErrorItem } from './errors.js';
export { verifyWebhookSignature, WEBHOOK_TOLERANCE_SECONDS } from './webhook-signature.js';
