import type { AnyRoute } from '../http/define-route.js';
import { createApiKey } from './admin/create-api-key.js';
import { createEnvironment } from './admin/create-environment.js';
import { deleteApiKey } from './admin/delete-api-key.js';
import { listApiKeys } from './admin/list-api-keys.js';
import { listEnvironments } from './admin/list-environments.js';
import { rotateSigningKey } from './admin/rotate-signing-key.js';
import { updateEnvironment } from './admin/update-environment.js';
import { listEnvironmentVariables } from './environment-variables/list-environment-variables.js';
import { getHealth } from './health/get-health.js';
import { getReady } from './health/get-ready.js';

/** Every route of the gateway, in the order HTTP-API.md lists them. */
export const routes: readonly AnyRoute[] = [
  // probes
  getHealth,
  getReady,
  // customer API
  listEnvironmentVariables,
  // operator API
  createEnvironment,
  listEnvironments,
  updateEnvironment,
  rotateSigningKey,
  createApiKey,
  listApiKeys,
  deleteApiKey,
];
