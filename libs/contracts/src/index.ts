export * from './define.js';
export * from './scopes.js';
export * from './services.js';
export * from './streams.js';
export * from './gateway.js';
export { allContracts } from './registry.js';
