export {
  Latchkey,
  type Connection,
  type ConnectionListItem,
  type EnvironmentVariable,
  type Integration,
  type IntegrationInput,
  type IntegrationListItem,
  type LatchkeyOptions,
  type MetadataResult,
  type Provider,
} from './client.js';
export { LatchkeyError, type LatchkeyErrorItem } from './errors.js';
