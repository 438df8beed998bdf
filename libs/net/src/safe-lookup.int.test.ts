import { once } from 'node:events';
import { createServer, request, type IncomingMessage, type RequestOptions, type Server } from 'node:http';
import type { AddressInfo, TcpSocketConnectOpts } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { createAddressPolicy } from './address-policy.js';
import { UpstreamNotAllowedError, checkUrlHost, createSafeLookup, type ResolveAll } from './safe-lookup.js';

/** A real upstream on loopback that counts what reaches it. */
let server: Server;
let port: number;
const seen = { connections: 0, requests: [] as { host: string | undefined; url: string | undefined }[] };

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.requests.push({ host: req.headers.host, url: req.url });
    res.end('upstream says hi');
  });
  server.on('connection', () => {
    seen.connections += 1;
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.close();
  await once(server, 'close');
});

beforeEach(() => {
  seen.connections = 0;
  seen.requests = [];
});

/** node:http hands socket options such as autoSelectFamily on to node:net; its types omit them. */
type GetOptions = Pick<RequestOptions, 'lookup' | 'family'> & Pick<TcpSocketConnectOpts, 'autoSelectFamily'>;

/** What a caller does: check the URL's host, then request with the safe lookup. */
function get(url: string, options: GetOptions, allowCidrs: string[]): Promise<{ status: number | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    checkUrlHost(url, createAddressPolicy({ allowCidrs }));
    const req = request(url, { agent: false, ...options }, (res: IncomingMessage) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('requests through the safe lookup', () => {
  it('reaches an upstream on 127.0.0.1 that an allowed CIDR opens, through real DNS', async () => {
    const lookup = createSafeLookup(createAddressPolicy({ allowCidrs: ['127.0.0.1/32'] }));
    // family 4: where `localhost` also answers ::1, that address is outside the allowed CIDR.
    const reply = await get(`http://localhost:${port}/ping`, { lookup, family: 4 }, ['127.0.0.1/32']);
    expect(reply).toEqual({ status: 200, body: 'upstream says hi' });
    expect(seen.requests).toEqual([{ host: `localhost:${port}`, url: '/ping' }]);
  });

  it.each([[false], [true]])('connects to exactly the address it checked (autoSelectFamily: %s)', async (autoSelectFamily) => {
    const resolved: string[] = [];
    const resolve: ResolveAll = (hostname, options, callback) => {
      resolved.push(hostname);
      callback(null, [{ address: '127.0.0.1', family: 4 }]);
    };
    const lookup = createSafeLookup(createAddressPolicy({ allowCidrs: ['127.0.0.1/32'] }), resolve);
    const reply = await get(`http://upstream.test:${port}/x`, { lookup, autoSelectFamily }, ['127.0.0.1/32']);
    expect(reply.status).toBe(200);
    expect(resolved).toEqual(['upstream.test']);
    expect(seen.requests).toEqual([{ host: `upstream.test:${port}`, url: '/x' }]);
  });

  it('refuses localhost with an empty allow-list before anything reaches the upstream', async () => {
    const lookup = createSafeLookup(createAddressPolicy({ allowCidrs: [] }));
    const failure = get(`http://localhost:${port}/secret`, { lookup }, []);
    await expect(failure).rejects.toBeInstanceOf(UpstreamNotAllowedError);
    await expect(failure).rejects.toMatchObject({ hostname: 'localhost', reason: 'loopback range' });
    // Give a stray connection time to show up on the server.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(seen.connections).toBe(0);
    expect(seen.requests).toEqual([]);
  });

  it('refuses a loopback IP literal, which node would connect to without any lookup', async () => {
    const lookup = createSafeLookup(createAddressPolicy({ allowCidrs: [] }));
    await expect(get(`http://127.0.0.1:${port}/secret`, { lookup }, [])).rejects.toMatchObject({ name: 'UpstreamNotAllowedError', address: '127.0.0.1' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(seen.connections).toBe(0);
  });
});
