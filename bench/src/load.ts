import autocannon from 'autocannon';

/**
 * The load generator, run as its own process so it does not share an event loop with the server
 * under test. Reads its settings from argv[2] (JSON) and prints the result as one JSON line.
 */
const options = JSON.parse(process.argv[2] ?? '{}') as {
  url: string;
  token?: string;
  headers?: Record<string, string>;
  method?: 'GET' | 'POST';
  body?: string;
  connections: number;
  durationS: number;
  /** A POST with a fixed body (the webhook ingest); GET when absent. */
  request?: { method: 'POST'; body: string; contentType: string };
  /** Requests per second in all, when the load is paced (BENCH_RATE); as fast as answered when absent. */
  rate?: number;
};
const result = await autocannon({
  url: options.url,
  connections: options.connections,
  duration: options.durationS,
  headers: {
    ...options.headers,
    ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    ...(options.request ? { 'content-type': options.request.contentType } : {}),
  },
  ...(options.request ? { method: options.request.method, body: options.request.body } : {}),
  ...(options.rate ? { overallRate: options.rate } : {}),
});
process.stdout.write(
  `${JSON.stringify({
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  })}\n`,
);
