import { baseServiceSchema, durationMs, loadConfig, port, positiveInt, secret } from '@latchkey/config';
import { versionedKeys } from '@latchkey/crypto';
import { z } from 'zod';

export const configSchema = baseServiceSchema('gateway', 0)
  .omit({ HEALTH_PORT: true })
  .extend({
    PORT: port(3003),
    /** Port of the Prometheus scrape (/metrics), apart from PORT and never behind API keys; 0 turns it off. */
    METRICS_PORT: port(9464),
    /** Where customers and end users reach this gateway; builds connect links and webhook URLs. */
    PUBLIC_URL: z.url().default('http://localhost:3003'),
    /** Where the hosted Connect UI is served; `${PUBLIC_URL}/connect` when unset. */
    CONNECT_URL: z.url().optional(),
    /** Bearer token of the operator API under /admin. */
    ADMIN_TOKEN: secret(),
    /** Keys the SHA-256 digest under which API keys are stored; changing it invalidates every key. */
    API_KEY_DIGEST_SECRET: secret(),
    /**
     * Seal environments' signing keys and variable values at rest: `v1:<base64 of 32 bytes>`,
     * comma-separated, as the vault's ENCRYPTION_KEYS. Every listed version opens; one seals
     * (SETTINGS_SEALING_VERSION), and every start reseals what another version sealed.
     */
    SETTINGS_ENCRYPTION_KEYS: versionedKeys,
    /**
     * The version of SETTINGS_ENCRYPTION_KEYS that seals; the highest when unset. A rotation
     * across replicas first gives every replica the new key while the old one still seals, then
     * moves this to the new key (a replica cannot open what a version it does not hold sealed).
     */
    SETTINGS_SEALING_VERSION: z.string().regex(/^v\d+$/, 'must look like v1, v2, ...').optional(),
    BOOTSTRAP_ENVIRONMENT: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/).default('dev'),
    /** Taken as given, so operators can set it from their own secret store. */
    BOOTSTRAP_SECRET_KEY: secret().optional(),
    /**
     * While the database is unreachable, a request that needs it answers 503 service_unavailable
     * after at most this long (never buffered, never the whole request deadline).
     */
    MONGODB_SERVER_SELECTION_TIMEOUT_MS: durationMs(1000),
    RATE_LIMIT_PER_MINUTE: positiveInt(6000),
    /**
     * Bytes of provider webhooks one environment may have stored per minute, across replicas
     * (each webhook counts its body and 1 KiB); past it, 429 with Retry-After, which providers
     * retry. Webhooks are public: this bounds what anyone who knows an environment's webhook
     * URL can push into the JOBS stream.
     */
    WEBHOOK_INGEST_BYTES_PER_MINUTE: z.coerce.number().int().min(1024 * 1024).default(128 * 1024 * 1024),
    /**
     * Bytes of provider webhook bodies one gateway replica holds while they arrive, all
     * environments together, counted as they arrive; past it, 503, which providers retry.
     */
    WEBHOOK_BODIES_HELD_BYTES: positiveInt(64 * 1024 * 1024),
    /**
     * How long a provider webhook's body may take to arrive once its headers have; past it, 400
     * invalid_body and the connection closed. Bounds how long a sender that trickles a body (or
     * declares one and never sends it) keeps a connection and what it sent held: node alone
     * would wait 5 minutes. A provider sends its at most ~700 KiB in far less.
     */
    WEBHOOK_BODY_TIMEOUT_MS: durationMs(30_000),
    /**
     * Requests one connect session (its end user) may make per minute, across replicas, before a
     * 429: a person connecting makes a handful; each flow started writes and may call a provider.
     */
    CONNECT_SESSION_REQUESTS_PER_MINUTE: positiveInt(120),
    /** Failed API-key authentications one client address may make per minute before a 429. */
    AUTH_FAILURES_PER_MINUTE: positiveInt(60),
    /**
     * How many reverse proxies the operator runs in front of the gateway. 0 (the default): the
     * client address is the socket's peer and X-Forwarded-For is ignored, since clients can write it.
     */
    TRUSTED_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0),
    /** The largest body of the routes that carry functions' code (deploy, compile, dry run). */
    MAX_BODY_BYTES: positiveInt(10 * 1024 * 1024),
    /**
     * The largest JSON body of every other route (at most MAX_BODY_BYTES): parsed JSON weighs
     * some twenty times its text, and a connection, a session or an action's input is small.
     */
    MAX_JSON_BODY_BYTES: positiveInt(1024 * 1024),
    /** The proxy's upstream timeout (as configured on the proxy): bounds how long a proxied call may wait. */
    PROXY_TIMEOUT_MS: durationMs(30_000),
    /** A function run's limit (as configured on the action-runner): bounds how long a sync action may wait. */
    FUNCTION_TIMEOUT_MS: durationMs(60_000),
    /** Days the operations log keeps an operation. */
    OPERATIONS_RETENTION_DAYS: positiveInt(14),
    /** Operations kept per environment at most; the sweep drops the oldest past it. */
    OPERATIONS_MAX_PER_ENVIRONMENT: positiveInt(1_000_000),
    /** How often the operations log is swept (retention and size). */
    OPERATIONS_SWEEP_INTERVAL_MS: durationMs(10 * 60_000),
    /**
     * On SIGTERM, /ready answers 503 for this long before the gateway stops accepting connections,
     * so that a load balancer stops sending it new requests first. Keep it under SHUTDOWN_TIMEOUT_MS.
     */
    SHUTDOWN_READY_DELAY_MS: z.coerce.number().int().min(0).max(60_000).default(2000),
  })
  .refine(
    (config) => config.SETTINGS_SEALING_VERSION === undefined || config.SETTINGS_ENCRYPTION_KEYS.some((key) => key.version === config.SETTINGS_SEALING_VERSION),
    { path: ['SETTINGS_SEALING_VERSION'], message: 'must be one of the versions of SETTINGS_ENCRYPTION_KEYS' },
  );

export type Config = z.infer<typeof configSchema>;

/** The only reader of process.env in this service. */
export const loadGatewayConfig = (env: Record<string, string | undefined> = process.env): Config =>
  loadConfig(configSchema, env);
