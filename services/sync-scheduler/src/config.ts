import { baseServiceSchema, loadConfig, positiveInt } from '@latchkey/config';
import type { z } from 'zod';

export const configSchema = baseServiceSchema('sync-scheduler', 3012).extend({
  /** The largest deployment (all of one integration's bundles, as JSON) accepted. */
  MAX_DEPLOYMENT_BYTES: positiveInt(20 * 1024 * 1024),
});

export type Config = z.infer<typeof configSchema>;

/** The only reader of process.env in this service. */
export const loadServiceConfig = (): Config => loadConfig(configSchema);
