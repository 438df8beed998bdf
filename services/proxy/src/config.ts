import { baseServiceSchema, booleanFlag, durationMs, loadConfig } from '@latchkey/config';
import { z } from 'zod';

// The proxy stores nothing: it reads no MONGODB_* setting, so it holds no database credential.
export const configSchema = baseServiceSchema('proxy', 3011).omit({ MONGODB_URI: true, MONGODB_DB: true }).extend({
  /** One upstream attempt may take this long (to the response headers, and between body chunks). */
  PROXY_TIMEOUT_MS: durationMs(30_000),
  /** CIDRs the proxy may reach although they are private, loopback…: `10.0.0.0/8,127.0.0.1/32`. */
  PROXY_ALLOW_CIDRS: z.string().default(''),
  PROXY_MAX_REDIRECTS: z.coerce.number().int().min(0).max(20).default(5),
  /** The longest wait between retries, whatever the provider's Retry-After says. */
  PROXY_RETRY_CAP_MS: durationMs(10_000),
  /**
   * Calls one replica holds at once, from when it takes one until its answer's last byte has
   * gone. Past it, a call is answered at once with 503 `service_unavailable`, never sent: a burst,
   * or a provider holding its answers, cannot grow the replica's memory without bound. Each call
   * holds at most about 2 MiB (a body near the inline limit each way; larger ones stream), most
   * far less.
   */
  PROXY_MAX_IN_FLIGHT: z.coerce.number().int().min(1).max(1_000_000).default(2_048),
  /** How long credentials are kept in memory; connection writes drop them at once. */
  PROXY_CREDENTIAL_CACHE_MS: durationMs(60_000),
  /**
   * Whether calls that succeeded reach the operations log, as failed ones always do. Off, a busy
   * proxy keeps a log of its failures only, and each successful call costs the machine less
   * (docs/benchmarks.md).
   */
  PROXY_LOG_SUCCESSES: booleanFlag(true),
});

export type Config = z.infer<typeof configSchema>;

/** The only reader of process.env in this service. */
export const loadServiceConfig = (): Config => loadConfig(configSchema);
