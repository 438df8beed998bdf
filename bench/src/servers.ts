import express from 'express';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, createInbox } from '@nats-io/transport-node';
import { Pool } from 'undici';
import { batchedPublisher } from '@latchkey/bus';

/** What the plain express server answers: nothing but a reply. */
const doNothing = { ok: true };

/**
 * One server of the benchmark, chosen by argv[2]:
 * - `express`: plain express with the do-nothing handler alone, for context;
 * - `reverse-proxy <url>`: a plain one-hop reverse proxy to `url` on node's http;
 * - `hop-front <nats>` and `hop-back <nats> <url>`: the proxy's topology with none of its work,
 *   an HTTP server handing each request over NATS to forwarders that call `url` on undici and
 *   send the body back, each side sending what one turn queued in one socket write: the floor
 *   that the design's process hops cost on the machine at hand;
 * The gateway and the other services are not here: the benchmark runs them from their built
 * `dist/main.js`, as a user does.
 * Prints the port it listens on, then serves until killed.
 */
/** Connects with the login a `nats://user:password@host:port` URL carries (the client does not read it there). */
function connectAs(url: string) {
  const parsed = new URL(url);
  return connect({
    servers: `${parsed.hostname}:${parsed.port}`,
    ...(parsed.username ? { user: decodeURIComponent(parsed.username), pass: decodeURIComponent(parsed.password) } : {}),
  });
}

const mode = process.argv[2];
// A profiled server (BENCH_PROFILE) writes its profile on a clean exit.
process.once('SIGTERM', () => process.exit(0));
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
  const nc = await connectAs(process.argv[3] ?? 'nats://127.0.0.1:4222');
  const inbox = createInbox();
  const waiting = new Map<string, http.ServerResponse>();
  let sequence = 0;
  nc.subscribe(`${inbox}.*`, {
    callback: (_error, msg) => {
      const res = waiting.get(msg.subject);
      waiting.delete(msg.subject);
      res?.writeHead(200, { 'content-type': 'application/json' }).end(msg.data);
    },
  });
  const publisher = batchedPublisher(nc);
  const call = new TextEncoder().encode('{}');
  const server = http.createServer((req, res) => {
    const reply = `${inbox}.${(sequence++).toString(36)}`;
    waiting.set(reply, res);
    publisher.publish('bench.hop', call, { reply });
  });
  server.listen(0, () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
} else if (mode === 'hop-back') {
  const nc = await connectAs(process.argv[3] ?? 'nats://127.0.0.1:4222');
  const pool = new Pool(process.argv[4] ?? 'http://127.0.0.1:1', { connections: 128 });
  const publisher = batchedPublisher(nc);
  nc.subscribe('bench.hop', {
    queue: 'bench-hop',
    callback: (_error, msg) => {
      void pool.request({ path: '/echo', method: 'GET' }).then(async (answer) => publisher.publish(msg.reply!, Buffer.from(await answer.body.arrayBuffer())));
    },
  });
  await nc.flush();
  process.stdout.write('0\n');
} else {
  process.stderr.write('usage: servers.js express|reverse-proxy <url>|hop-front <nats>|hop-back <nats> <url>\n');
  process.exit(2);
}

