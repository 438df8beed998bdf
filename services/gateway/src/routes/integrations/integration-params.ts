import { z } from 'zod';

/** The integration a route names in its path: `/integrations/{uniqueKey}`. */
export const uniqueKeyParams = z.strictObject({ uniqueKey: z.string().min(1).max(128) });
