import { z } from 'zod';

/** The body of `/sync/start`, `/sync/pause` and `/sync/trigger`: an integration, its syncs (empty = all), one connection or all. */
export const syncSelection = {
  provider_config_key: z.string().min(1).max(128),
  syncs: z.array(z.string().min(1).max(100)).max(100),
  connection_id: z.string().min(1).max(255).optional(),
};

export const variantName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ or - (64 at most)');
