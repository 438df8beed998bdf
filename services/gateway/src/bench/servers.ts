import express from 'express';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '@latchkey/config';
import { runService } from '@latchkey/runtime';
import { configSchema } from '../config.js';
import { defineRoute } from '../http/define-route.js';
import { startGateway } from '../start-gateway.js';

/** The handler both servers run: it does nothing but answer. */
const doNothing = { ok: true };

/**
 * One server of the benchmark, chosen by argv[2]:
 * - `express`: plain express with the do-nothing handler alone, for context;
 * - `reverse-proxy <url>`: a plain one-hop reverse proxy to `url` on node's http;
 * - `gateway`: the real gateway (real NATS, MongoDB-wire server, key cache, rate limiter, scope
 *   check, request ids) with the same handler mounted twice: `/bench` behind API-key auth and
 *   `/bench-open` without it, so one process serves both sides of the comparison.
 * Prints the port it listens on, then serves until killed.
 */
const mode = process.argv[2];
if (mode === 'express') {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.get('/bench', (_req, res) => {
    res.json(doNothing);
  });
  const server = app.listen(0, () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
} else if (mode === 'reverse-proxy') {
  // A plain one-hop reverse proxy on node's http, as a yardstick for the proxy's overhead.
  const target = new URL(process.argv[3] ?? 'http://127.0.0.1:1');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const server = http.createServer((req, res) => {
    const upstream = http.request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host }, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  server.listen(0, () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
} else if (mode === 'gateway') {
  const behindAuth = defineRoute({
    method: 'get',
    path: '/bench',
    auth: 'api_key',
    scope: 'environment:variables:read',
    schemas: {},
    handler: async () => ({ body: doNothing }),
  });
  const open = defineRoute({
    method: 'get',
    path: '/bench-open',
    auth: 'public',
    scope: null,
    schemas: {},
    handler: async () => ({ body: doNothing }),
  });
  const config = parseConfig(configSchema, { ...process.env, PORT: '0', LOG_LEVEL: 'error' });
  const { started } = await runService({ service: 'gateway', config, start: (runtime, cfg) => startGateway(runtime, cfg, [behindAuth, open]) });
  process.stdout.write(`${started.port}\n`);
} else {
  process.stderr.write('usage: servers.js express|reverse-proxy <url>|gateway\n');
  process.exit(2);
}
