import { z } from 'zod';
import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

/** Re-encryption walks every stored secret: give it far longer than an ordinary request. */
const ROTATION_TIMEOUT_MS = 15 * 60_000;

/**
 * Key rotation, for operators: after adding a new version to ENCRYPTION_KEYS (and restarting
 * the vault), this re-wraps every data key under it and, with `data_keys: true`, re-encrypts
 * every credential under fresh data keys. Then the old version can be removed.
 */
export const rotateEncryptionKeys = defineRoute({
  method: 'post',
  path: '/admin/encryption/rotate',
  auth: 'admin',
  scope: null,
  doc: {
    summary: 'Re-wrap data keys and re-encrypt secrets under the newest key',
    answer: z.object({ data: vaultContracts.rotateKeys.response }),
  },
  schemas: { body: z.strictObject({ data_keys: z.boolean().default(true) }).optional() },
  handler: async ({ deps, body }) => ({
    body: { data: await deps.bus.request(vaultContracts.rotateKeys, { data_keys: body?.data_keys ?? true }, { timeoutMs: ROTATION_TIMEOUT_MS }) },
  }),
});
