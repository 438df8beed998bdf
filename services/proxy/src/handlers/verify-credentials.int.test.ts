import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAddressPolicy, createSafeLookup, parseCidrList } from '@latchkey/net';
import type { Dispatcher } from 'undici';
import { createUpstreamDispatcher } from '../upstream/call-upstream.js';
import { verifyCredentialsHandler } from './verify-credentials.js';

/** The provider's verification endpoint, on loopback: counts what reaches it. */
let provider: Server;
let hits = 0;
let dispatcher: Dispatcher;
const policy = createAddressPolicy({ allowCidrs: parseCidrList('127.0.0.1/32') });

beforeAll(async () => {
  provider = createServer((_req, res) => {
    hits++;
    res.writeHead(200).end('{}');
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  dispatcher = createUpstreamDispatcher(createSafeLookup(policy));
});

afterAll(async () => {
  await dispatcher?.close();
  await new Promise((resolve) => provider?.close(resolve));
});

const verify = (apiKey: string) =>
  verifyCredentialsHandler({ upstream: { policy, dispatcher, timeoutMs: 5_000, maxRedirects: 0 } })({
    credentials: {
      id: 'verification',
      provider: 'crm',
      auth_mode: 'API_KEY',
      expires_at: null,
      base_url: `http://127.0.0.1:${(provider.address() as AddressInfo).port}`,
      headers: { 'X-Api-Key': apiKey },
      query: {},
      decompress: false,
    },
    method: 'GET',
    endpoints: ['/me'],
    headers: {},
    timeout_ms: 5_000,
  });

it('tries good credentials on the provider', async () => {
  expect(await verify('k-123')).toEqual({ results: [{ endpoint: '/me', status: 200 }] });
});

// An end user's pasted key with a line break: it was reported as the provider out of reach
// (ECONNRESET), and the user told to try again later, with a key that can never work.
it('refuses credentials no HTTP header can carry, as such, before reaching the provider', async () => {
  hits = 0;
  await expect(verify('k-123\n')).rejects.toMatchObject({ code: 'invalid_headers' });
  await expect(verify('ключ')).rejects.toMatchObject({ code: 'invalid_headers' });
  expect(hits).toBe(0);
});
