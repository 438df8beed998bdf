import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { http, type Stack } from './stack.js';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  json: any;
}

/**
 * A customer's webhook receiver on loopback. `mode` decides its answer: `ok` (200), a status
 * (e.g. 503), or `down` (the port closed: connection refused). It keeps every request it got.
 */
export async function startReceiver(port = 0) {
  const received: Received[] = [];
  let answer: number | ((body: string) => number) = 200;
  let server: Server | undefined;
  let boundPort = port;

  const listen = async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const status = typeof answer === 'function' ? answer(body) : answer;
        if (status >= 200 && status < 300) received.push({ headers: req.headers, body, json: JSON.parse(body) });
        res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    await new Promise<void>((resolve) => server!.listen(boundPort, '127.0.0.1', resolve));
    boundPort = (server.address() as AddressInfo).port;
  };
  await listen();

  return {
    received,
    get url() {
      return `http://127.0.0.1:${boundPort}/hooks`;
    },
    answerWith(status: number | ((body: string) => number)) {
      answer = status;
    },
    /** Closes the port: senders get connection refused. */
    async down() {
      const closing = new Promise<void>((resolve) => server!.close(() => resolve()));
      server!.closeAllConnections();
      await closing;
    },
    up: listen,
    /** Waits until `count` matching requests arrived. */
    async waitFor(predicate: (item: Received) => boolean, count = 1, timeoutMs = 20_000): Promise<Received[]> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = received.filter(predicate);
        if (found.length >= count) return found;
        if (Date.now() > deadline) throw new Error(`timed out: ${found.length} of ${count} webhooks arrived`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    close: async () => {
      server?.closeAllConnections();
      await new Promise<void>((resolve) => (server?.listening ? server.close(() => resolve()) : resolve()));
    },
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** `acme`: an API-key provider that signs webhooks (`X-Acme-Signature-256: sha256=<hex>`) and routes by `account.id`. */
export const ACME_PROVIDER_YAML = `acme:
  display_name: Acme
  categories: [test]
  auth_mode: API_KEY
  proxy:
    base_url: http://127.0.0.1:9
    headers:
      X-Api-Key: \${apiKey}
  webhook:
    signature_header: X-Acme-Signature-256
    algorithm: sha256
    encoding: hex
    prefix: sha256=
    routing:
      body_path: account.id
      match: connection_config
      key: accountId
`;

/** `acme-oauth`: an OAuth 2 provider whose token endpoint is `tokenUrl` (for refresh failures). */
export function acmeOAuthProviderYaml(tokenUrl: string): string {
  return `acme-oauth:
  display_name: Acme OAuth
  categories: [test]
  auth_mode: OAUTH2
  authorization_url: ${tokenUrl.replace(/\/token$/, '/authorize')}
  token_url: ${tokenUrl}
`;
}

export function acmeSignature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * A fresh environment whose webhooks go to `webhookUrl`: its public id, signing key and a
 * full-access API key, and an integration of `acme` with its webhook secret.
 */
export async function webhookEnvironment(stack: Stack, name: string, webhookUrl: string, options: { forward?: boolean; sendAuth?: boolean } = {}) {
  const admin = (method: string, path: string, body?: unknown) => http(`${stack.url}/admin${path}`, { method, token: stack.adminToken, ...(body === undefined ? {} : { body }) });
  const created = (await admin('POST', '/environments', { name })).json.data;
  await admin('PATCH', `/environments/${name}`, { webhook_url: webhookUrl, send_auth_webhooks: options.sendAuth ?? false });
  const apiKey = (await admin('POST', `/environments/${name}/api-keys`, { display_name: 'all', scopes: 'full_access' })).json.data.secret as string;
  const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: apiKey, ...(body === undefined ? {} : { body }) });
  await api('POST', '/integrations', { provider: 'acme', unique_key: 'acme', forward_webhooks: options.forward ?? true });
  const webhookSecret = (await api('GET', '/integrations/acme?include=webhook')).json.data.webhookSecret as string;
  return { publicId: created.public_id as string, signingKey: created.webhook_signing_key as string, apiKey, webhookSecret, api, admin };
}

/** Posts a provider webhook, signed with `secret` unless told otherwise. */
export async function sendProviderWebhook(stack: Stack, publicId: string, body: unknown, options: ProviderWebhookOptions = {}) {
  return sendProviderText(stack, publicId, JSON.stringify(body), options);
}

interface ProviderWebhookOptions {
  secret?: string;
  signature?: string;
  query?: string;
  integration?: string;
}

/** Posts a provider webhook whose body is `text` as it is (JSON that `JSON.stringify` could not write, say). */
export async function sendProviderText(stack: Stack, publicId: string, text: string, options: ProviderWebhookOptions = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const signature = options.signature ?? (options.secret ? acmeSignature(options.secret, text) : undefined);
  if (signature) headers['x-acme-signature-256'] = signature;
  return fetch(`${stack.url}/webhook/${publicId}/${options.integration ?? 'acme'}${options.query ?? ''}`, { method: 'POST', headers, body: text });
}
