import { createServer, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A test server listening on a free loopback port. */
export interface LoopbackServer {
  server: Server;
  url: string;
  /** Stops listening and cuts open connections, so a test never waits on keep-alive. */
  close(): Promise<void>;
}

/**
 * Serves `route` on 127.0.0.1 at a free port. A request whose route throws is answered by
 * `answerFailure`, or cut off when its headers are already sent.
 */
export async function serveOnLoopback(
  route: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
  answerFailure: (res: ServerResponse, error: unknown) => void,
): Promise<LoopbackServer> {
  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      answerFailure(res, error);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(body);
  res
    .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
    .end(text);
}
