export { dockerAvailable } from './docker.js';
export { startMongo, uniqueDbName, type TestMongo } from './mongo-server.js';
export { startNats, type TestNats } from './nats-server.js';
export { freePort, waitForPort } from './ports.js';
export { repoRoot } from './repo-root.js';
