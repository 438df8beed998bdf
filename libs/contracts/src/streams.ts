/**
 * JetStream streams and KV buckets. Streams are created idempotently by whichever service
 * starts first (`ensureStreams` in the bus); their subjects never overlap request subjects.
 */
export const STREAMS = {
  events: { name: 'EVENTS', subjects: ['events.>'], maxAgeMs: 7 * 24 * 3600 * 1000 },
  /**
   * Work that must survive a crash: a week, and 8 GiB unless the services are given another bound
   * (`JOBS_STREAM_MAX_BYTES`). Past the bound a new job is refused (discard `new`), never made
   * room for by dropping the oldest: those may not have been done yet, and a refused job is a 503
   * its publisher sees. Without it a stuck consumer lets the stream fill NATS's store, and then
   * every stream on that server fails.
   */
  jobs: { name: 'JOBS', subjects: ['jobs.>'], maxAgeMs: 7 * 24 * 3600 * 1000, maxBytes: 8 * 1024 ** 3, discard: 'new' },
  /**
   * Batches of the operations log on their way to the gateway: a day at most and 256 MiB, the
   * oldest dropped first; the log itself is kept in the gateway's database.
   */
  operations: { name: 'OPERATIONS', subjects: ['operations.recorded.>'], maxAgeMs: 24 * 3600 * 1000, maxBytes: 256 * 1024 ** 2 },
} as const;

export const KV_BUCKETS = {
  /** Fixed-window rate-limit budgets, one key per account and window; entries expire on their own. */
  rateLimits: { name: 'rate_limits', ttlMs: 5 * 60 * 1000 },
} as const;
