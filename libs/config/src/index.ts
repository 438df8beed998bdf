export { ConfigError, loadConfig, parseConfig } from './load-config.js';
export { baseServiceSchema, booleanFlag, logLevel, port, positiveInt, secret, url } from './fields.js';
