export { createCache, type Cache, type CacheOptions, type LoadOptions, type SetOptions, type Stamp } from './create-cache.js';
export { cachedLoader } from './cached-loader.js';
