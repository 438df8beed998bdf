import { z } from 'zod';
import { BASE_VARIANT } from '@latchkey/contracts';

/** The body of `/sync/start`, `/sync/pause` and `/sync/trigger`: an integration, its syncs (empty = all), one connection or all. */
export const syncSelection = {
  provider_config_key: z.string().min(1).max(128),
  syncs: z.array(z.string().min(1).max(100)).max(100),
  connection_id: z.string().min(1).max(255).optional(),
};

export const variantName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ or - (64 at most)');

/** A sync variant's path (`/sync/{name}/variant/{variant}`) and body, for creating and deleting one. */
export const variantParams = z.strictObject({
  name: z.string().min(1).max(100),
  variant: variantName.refine((value) => value !== BASE_VARIANT, `"${BASE_VARIANT}" is every sync's own variant`),
});
export const variantBody = z.strictObject({ provider_config_key: z.string().min(1).max(128), connection_id: z.string().min(1).max(255) });
