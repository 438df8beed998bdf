import { z } from 'zod';
import { connectionId, metadataSchema, vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

const metadataBody = z.strictObject({
  connection_id: z.union([connectionId, z.array(connectionId).min(1).max(1000)]),
  provider_config_key: z.string().min(1).max(128),
  metadata: metadataSchema,
});

function metadataRoute(method: 'post' | 'patch') {
  return defineRoute({
    method,
    path: '/connections/metadata',
    auth: 'api_key',
    scope: 'environment:connections:update',
    doc: {
      summary: method === 'post' ? "Replace connections' metadata" : "Merge into connections' metadata",
      status: method === 'post' ? 201 : 200,
      answer: metadataBody,
      errors: ['unknown_connection', 'unknown_provider_config'],
    },
    schemas: { body: metadataBody },
    errorShape: 'message',
    handler: async ({ deps, key, body }) => {
      await deps.bus.request(vaultContracts.writeMetadata, {
        environment_id: key.environmentId,
        connection_ids: Array.isArray(body.connection_id) ? body.connection_id : [body.connection_id],
        provider_config_key: body.provider_config_key,
        metadata: body.metadata,
        mode: method === 'post' ? 'replace' : 'merge',
      });
      return { status: method === 'post' ? 201 : 200, body };
    },
  });
}

/** Replaces the metadata of one or many connections; answers with the body it was given. */
export const setMetadata = metadataRoute('post');
/** Shallow-merges into the metadata of one or many connections. */
export const updateMetadata = metadataRoute('patch');
