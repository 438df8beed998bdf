export * from './define.js';
export * from './scopes.js';
export * from './services.js';
export * from './streams.js';
export * from './gateway.js';
export * from './credentials.js';
export * from './vault.js';
export * from './proxy.js';
export { allContracts } from './registry.js';
