export { dockerAvailable } from './docker.js';
export { eventually } from './eventually.js';
export { startFerretDb, startMongo, uniqueDbName, type TestMongo } from './mongo-server.js';
export { startNats, type NatsCredentials, type TestNats } from './nats-server.js';
export { natsServerBinary, startNatsCluster, type TestNatsCluster, type TestNatsNode } from './nats-cluster.js';
export { canBind, freePort, waitForPort } from './ports.js';
export { explainUntilIndexed, judgePlan, type Explainable, type QueryPlanVerdict } from './query-plan.js';
export { watchCommands, type WatchedConnection } from './watch-commands.js';
export { repoRoot } from './repo-root.js';
export { logRecords, runToExit, type ProcessOutcome } from './run-to-exit.js';
export { serviceEnvironment, type NatsForService } from './service-environment.js';
export {
  startOAuthServer,
  type ClientAuthMethod,
  type OAuthClient,
  type OAuthResourceEcho,
  type OAuthServerOptions,
  type OAuthServerSettings,
  type OAuthStats,
  type TestOAuthServer,
  type TokenRequestRecord,
} from './oauth-server.js';
export {
  bytesDigest,
  gzipPayload,
  pseudoRandomBytes,
  pseudoRandomChunks,
  startUpstreamApi,
  type PaginationItem,
  type TestUpstreamApi,
  type UpstreamApiOptions,
  type UpstreamEcho,
  type UpstreamRequestRecord,
} from './upstream-api.js';
export { startOAuth1Server, type OAuth1Consumer, type TestOAuth1Server } from './oauth1-server.js';
export { startTcpRelay, type TestTcpRelay } from './tcp-relay.js';
export { idOrSecretLabels, parsePrometheusText, sampleSum, type PromFamily, type PromSample } from './prometheus-text.js';
