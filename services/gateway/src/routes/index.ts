import type { AnyRoute, BareRoute } from '../http/define-route.js';
import { createApiKey } from './admin/create-api-key.js';
import { createEnvironment } from './admin/create-environment.js';
import { deleteApiKey } from './admin/delete-api-key.js';
import { listApiKeys } from './admin/list-api-keys.js';
import { listEnvironments } from './admin/list-environments.js';
import { listGivenUp } from './admin/list-given-up.js';
import { listInboundWebhooks } from './admin/list-inbound-webhooks.js';
import { listWebhookAttempts } from './admin/list-webhook-attempts.js';
import { getEnvironmentOperation } from './admin/get-environment-operation.js';
import { listEnvironmentOperations } from './admin/list-environment-operations.js';
import { rotateEncryptionKeys } from './admin/rotate-encryption-keys.js';
import { getSchedulerLeader } from './admin/get-scheduler-leader.js';
import { getSigningKey } from './admin/get-signing-key.js';
import { rotateSigningKey } from './admin/rotate-signing-key.js';
import { updateEnvironment } from './admin/update-environment.js';
import { saveApiKey, saveBasic, saveTypedCredentials } from './auth/session-credentials.js';
import { createConnectSession } from './connect/create-connect-session.js';
import { connectOAuth, startOAuthFromPage } from './oauth/connect-oauth.js';
import { oauthCallback } from './oauth/oauth-callback.js';
import { connectPage, connectScript } from './connect/connect-ui.js';
import { createReconnectSession } from './connect/create-reconnect-session.js';
import { deleteConnectSession } from './connect/delete-connect-session.js';
import { getConnectSession } from './connect/get-connect-session.js';
import { createConnection } from './connections/create-connection.js';
import { deleteConnection } from './connections/delete-connection.js';
import { getConnectionLegacy } from './connections/get-connection-legacy.js';
import { getConnection } from './connections/get-connection.js';
import { listConnections } from './connections/list-connections.js';
import { patchConnection } from './connections/patch-connection.js';
import { setMetadata, updateMetadata } from './connections/write-metadata.js';
import { listEnvironmentVariables } from './environment-variables/list-environment-variables.js';
import { createIntegration } from './integrations/create-integration.js';
import { deleteIntegration } from './integrations/delete-integration.js';
import { getIntegration } from './integrations/get-integration.js';
import { listIntegrations } from './integrations/list-integrations.js';
import { updateIntegration } from './integrations/update-integration.js';
import { getProvider } from './providers/get-provider.js';
import { listProviders } from './providers/list-providers.js';
import { getProviderLogo } from './logos/get-provider-logo.js';
import { proxyRequest } from './proxy/proxy-request.js';
import { getActionResult } from './actions/get-action-result.js';
import { triggerAction } from './actions/trigger-action.js';
import { compileFunction } from './functions/compile-function.js';
import { deployFunctions } from './functions/deploy-functions.js';
import { dryRunFunction } from './functions/dry-run-function.js';
import { getScriptsConfig } from './functions/get-scripts-config.js';
import { listRecords } from './records/list-records.js';
import { getOperation } from './operations/get-operation.js';
import { listOperations } from './operations/list-operations.js';
import { createSyncVariant } from './syncs/create-sync-variant.js';
import { deleteSyncVariant } from './syncs/delete-sync-variant.js';
import { getSyncStatus } from './syncs/get-sync-status.js';
import { pauseSyncs } from './syncs/pause-syncs.js';
import { startSyncs } from './syncs/start-syncs.js';
import { triggerSyncs } from './syncs/trigger-syncs.js';
import { updateConnectionFrequency } from './syncs/update-connection-frequency.js';
import { pruneRecords } from './records/prune-records.js';
import { getHealth } from './health/get-health.js';
import { receiveWebhook } from './webhooks/receive-webhook.js';
import { getReady } from './health/get-ready.js';
import { getReadySelf } from './health/get-ready-self.js';
import { mcpDelete, mcpEndpoint, mcpGet } from './mcp/mcp-endpoint.js';
import { buildOpenApiDocument } from '../http/openapi-document.js';
import { getOpenApiDocument } from './reference/get-openapi-document.js';
import { getReferenceAsset } from './reference/get-reference-asset.js';
import { getReferencePage } from './reference/get-reference-page.js';

/** Every route of the gateway, in the order HTTP-API.md lists them. */
export const routes: readonly AnyRoute[] = [
  // probes
  getHealth,
  getReady,
  getReadySelf,
  // customer API: catalog
  listProviders,
  getProvider,
  getProviderLogo,
  // integrations
  listIntegrations,
  createIntegration,
  getIntegration,
  updateIntegration,
  deleteIntegration,
  // connections (metadata before /connections/:connectionId, which would match it)
  setMetadata,
  updateMetadata,
  createConnection,
  listConnections,
  getConnection,
  getConnectionLegacy,
  patchConnection,
  deleteConnection,
  // connect sessions
  createConnectSession,
  createReconnectSession,
  getConnectSession,
  deleteConnectSession,
  // connect flows (end users, with the session token)
  connectPage,
  connectScript,
  saveApiKey,
  saveBasic,
  saveTypedCredentials,
  connectOAuth,
  startOAuthFromPage,
  oauthCallback,
  // actions and functions
  triggerAction,
  getActionResult,
  getScriptsConfig,
  compileFunction,
  dryRunFunction,
  deployFunctions,
  // environment
  listEnvironmentVariables,
  // syncs
  startSyncs,
  pauseSyncs,
  triggerSyncs,
  getSyncStatus,
  updateConnectionFrequency,
  createSyncVariant,
  deleteSyncVariant,
  // MCP: a connection's actions as tools
  mcpEndpoint,
  mcpGet,
  mcpDelete,
  // records
  listRecords,
  pruneRecords,
  // the operations log
  listOperations,
  getOperation,
  // operator API
  createEnvironment,
  listEnvironments,
  updateEnvironment,
  getSigningKey,
  rotateSigningKey,
  createApiKey,
  listApiKeys,
  deleteApiKey,
  rotateEncryptionKeys,
  listGivenUp,
  listInboundWebhooks,
  listWebhookAttempts,
  listEnvironmentOperations,
  getEnvironmentOperation,
  getSchedulerLeader,
  // the API reference, built from this list and bareRoutes
  getOpenApiDocument(() => buildOpenApiDocument(routes, bareRoutes)),
  getReferencePage,
  getReferenceAsset,
];

/**
 * Hot paths served before express (`withBareRoutes`): the proxy, and provider webhooks (public:
 * the provider's signature is checked by the webhook router).
 */
export const bareRoutes: readonly BareRoute[] = [proxyRequest, receiveWebhook];
