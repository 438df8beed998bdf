export { ConfigError, loadConfig, parseConfig } from './load-config.js';
export { baseServiceSchema, booleanFlag, durationMs, logLevel, port, positiveInt, secret, url } from './fields.js';
