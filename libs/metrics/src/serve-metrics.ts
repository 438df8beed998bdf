import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:http';
import { CONTENT_TYPE, scrape } from './registry.js';

/** Answers a scrape: the text exposition of this process's registry. */
export function answerScrape(res: ServerResponse): void {
  scrape().then(
    (text) => {
      res.writeHead(200, { 'content-type': CONTENT_TYPE });
      res.end(text);
    },
    () => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('metrics could not be collected\n');
    },
  );
}

/** Whether a probe-server request asks for metrics. */
export function isScrape(req: IncomingMessage): boolean {
  return req.method === 'GET' && (req.url ?? '').split('?')[0] === '/metrics';
}

/**
 * A server of its own for `/metrics` (the gateway's, beside its public port), never behind API
 * keys: expose it to the cluster only.
 */
export async function serveMetrics(port: number, host?: string): Promise<Server> {
  const server = createServer((req, res) => {
    if (isScrape(req)) answerScrape(res);
    else {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'route_not_found', message: 'Not found' } }));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if (host === undefined) server.listen(port, resolve);
    else server.listen(port, host, resolve);
  });
  return server;
}
