import { z } from 'zod';

/** A secret from the environment: required, never defaulted, long enough to be one. */
export function secret(minLength = 32) {
  return z.string({ error: 'is required (secrets have no default)' }).min(minLength, `must be at least ${minLength} characters`);
}

export const port = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);

export const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/** The longest a Node timer waits: given more, it fires after 1 ms instead. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * A duration in milliseconds that a timer waits out: at least `min` (1 by default; 0 where
 * the setting documents what 0 means), and at most `MAX_TIMER_MS`, since a longer timeout would
 * not wait at all.
 */
export const durationMs = (fallback: number, { min = 1 }: { min?: number } = {}) =>
  z.coerce
    .number()
    .int()
    .min(min, `must be at least ${min}`)
    .max(MAX_TIMER_MS, `must be at most ${MAX_TIMER_MS} (about 24.8 days): Node fires a longer timer at once`)
    .default(fallback);

export const booleanFlag = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0'])
    .default(fallback ? 'true' : 'false')
    .transform((value) => value === 'true' || value === '1');

export const url = (fallback?: string) => (fallback === undefined ? z.url() : z.url().default(fallback));

export const logLevel = z.enum(['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly']).default('info');

/** What every service reads: where NATS and MongoDB are, how it logs, how long it waits. */
export function baseServiceSchema(service: string, healthPort: number) {
  return z.object({
    NATS_URL: z.string().default('nats://127.0.0.1:4222'),
    /**
     * This service's own NATS password (its user is its name); NATS allows it only its contracts'
     * subjects. The server reads it from its environment into its config, where a value starting
     * with a digit or `-` is taken for a number: it must start with a letter.
     */
    NATS_PASSWORD: secret(32).regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'must start with a letter and hold only letters, digits, _ and - (the NATS server reads it as a config value)'),
    MONGODB_URI: z.string().regex(/^mongodb(\+srv)?:\/\//, 'must be a mongodb:// URI').default('mongodb://127.0.0.1:27017/?directConnection=true'),
    MONGODB_DB: z.string().regex(/^[A-Za-z0-9_-]{1,63}$/).default(`latchkey_${service.replace(/-/g, '_')}`),
    LOG_LEVEL: logLevel,
    REQUEST_TIMEOUT_MS: durationMs(5000),
    SHUTDOWN_TIMEOUT_MS: durationMs(10000),
    HEALTH_PORT: port(healthPort),
    /**
     * How many copies of each JetStream stream and KV bucket this service creates: 1 on a single
     * NATS server, 3 on a clustered one. Every service must be given the same value.
     */
    JETSTREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
    /**
     * The JOBS stream's bound in bytes; unset: 8 GiB (`STREAMS.jobs.maxBytes` in
     * @latchkey/contracts). Past it a new job is refused (503) rather than an old one dropped.
     * NATS reserves it in its JetStream store when it takes the stream, so it must fit there.
     * Every service must be given the same value: whichever starts first creates the stream.
     */
    JOBS_STREAM_MAX_BYTES: z.coerce
      .number()
      .int()
      .min(64 * 1024 ** 2, 'must be at least 67108864 (64 MiB)')
      .optional(),
    /**
     * How long the service waits at start, retrying with back-off, while a clustered JetStream
     * is still electing its leader ("temporarily unavailable"), before it gives up and exits;
     * 0: not at all (the first such error stops the start).
     */
    JETSTREAM_SETUP_TIMEOUT_MS: durationMs(300_000, { min: 0 }),
  });
}
