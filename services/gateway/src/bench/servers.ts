import express from 'express';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { batchedPublisher, createBus, type Bus } from '@latchkey/bus';
import { parseConfig } from '@latchkey/config';
import { createLogger } from '@latchkey/logger';
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
 * - `hop-front <nats>` and `hop-back <nats> <url>`: the proxy's topology with none of its work,
 *   an HTTP server handing each request over NATS to forwarders that call `url` on undici and
 *   send the body back, each side sending what one turn queued in one socket write: the floor
 *   that the design's process hops cost on the machine at hand;
 * - `gateway`: the real gateway (real NATS, MongoDB-wire server, key cache, rate limiter, scope
 *   check, request ids) with the same handler mounted twice: `/bench` behind API-key auth and
 *   `/bench-open` without it, so one process serves both sides of the comparison.
 * Prints the port it listens on, then serves until killed.
 */
/** Connects with the login a `nats://user:password@host:port` URL carries (the client does not read it there). */
function connectAs(url: string): Promise<Bus> {
  const parsed = new URL(url);
  return createBus({
    servers: `${parsed.hostname}:${parsed.port}`,
    service: 'bench',
    identity: { user: decodeURIComponent(parsed.username), password: decodeURIComponent(parsed.password) },
    logger: createLogger({ service: 'bench', silent: true }),
    requestTimeoutMs: 5_000,
  });
}

/** What one turn publishes leaves in one socket write, as the proxy hop's own messages do. */
const turnPublisher = (bus: Bus) => batchedPublisher({ publish: (subject, data, options) => bus.publishRaw(subject, data, options?.reply) });

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
} else if (mode === 'hop-front') {
  const bus = await connectAs(process.argv[3] ?? 'nats://127.0.0.1:4222');
  const inbox = bus.newInbox();
  const waiting = new Map<string, http.ServerResponse>();
  let sequence = 0;
  bus.subscribeRaw(`${inbox}.*`, (msg) => {
    const res = waiting.get(msg.subject);
    waiting.delete(msg.subject);
    res?.writeHead(200, { 'content-type': 'application/json' }).end(msg.data);
  });
  const publisher = turnPublisher(bus);
  const call = new TextEncoder().encode('{}');
  const server = http.createServer((req, res) => {
    const reply = `${inbox}.${(sequence++).toString(36)}`;
    waiting.set(reply, res);
    publisher.publish('bench.hop', call, { reply });
  });
  server.listen(0, () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
} else if (mode === 'hop-back') {
  const bus = await connectAs(process.argv[3] ?? 'nats://127.0.0.1:4222');
  const pool = new Pool(process.argv[4] ?? 'http://127.0.0.1:1', { connections: 128 });
  const publisher = turnPublisher(bus);
  bus.subscribeRaw(
    'bench.hop',
    (msg) => {
      void pool.request({ path: '/echo', method: 'GET' }).then(async (answer) => publisher.publish(msg.reply!, Buffer.from(await answer.body.arrayBuffer())));
    },
    { queue: 'bench-hop' },
  );
  await bus.flush();
  process.stdout.write('0\n');
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
  process.stderr.write('usage: servers.js express|reverse-proxy <url>|hop-front <nats>|hop-back <nats> <url>|gateway\n');
  process.exit(2);
}

