import { baseServiceSchema, loadConfig } from '@latchkey/config';
import type { z } from 'zod';

export const configSchema = baseServiceSchema('sync-scheduler', 3012);

export type Config = z.infer<typeof configSchema>;

/** The only reader of process.env in this service. */
export const loadServiceConfig = (): Config => loadConfig(configSchema);
