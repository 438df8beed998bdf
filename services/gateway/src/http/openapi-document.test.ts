import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import express from 'express';
import { Validator } from '@seriousme/openapi-schema-validator';
import { ERROR_CODES } from '@latchkey/errors';
import { bareRoutes, routes } from '../routes/index.js';
import type { GatewayDeps } from './deps.js';
import { mountRoutes } from './mount-routes.js';
import { buildOpenApiDocument, openApiText } from './openapi-document.js';

/**
 * The API reference against the gateway itself: valid OpenAPI 3.1, one operation for each route
 * express has mounted and each path the routes served before express answer, nothing more, and
 * the committed docs/openapi.json the same as what the routes give.
 */

const document = buildOpenApiDocument(routes, bareRoutes);
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

type Operation = Record<string, unknown> & { security: Array<Record<string, string[]>>; responses: Record<string, { 'x-latchkey-error-codes'?: string[] }> };

function documented(): Map<string, Operation> {
  const operations = new Map<string, Operation>();
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) operations.set(`${method.toUpperCase()} ${path}`, operation as Operation);
  }
  return operations;
}

/** What express routes, read from its router: `METHOD /path/{param}` for every mounted route. */
function mounted(): string[] {
  const app = express();
  // Mounting reads only the body limit; nothing is called until a request comes.
  mountRoutes(app, routes, { config: { MAX_BODY_BYTES: 1024, MAX_JSON_BODY_BYTES: 1024 } } as GatewayDeps);
  const stack = (app as unknown as { router: { stack: Array<{ route?: { path: string; methods: Record<string, boolean> } }> } }).router.stack;
  return stack.flatMap((layer) =>
    layer.route
      ? Object.keys(layer.route.methods).map((method) => `${method.toUpperCase()} ${layer.route!.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`)
      : [],
  );
}

describe('the OpenAPI document', () => {
  it('is valid OpenAPI 3.1', async () => {
    const result = await new Validator().validate(structuredClone(document) as unknown as Parameters<Validator['validate']>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toMatch(/^3\.1\./);
  });

  it('has one operation for each mounted route and each path served before express, and nothing else', () => {
    const operations = [...documented().keys()];
    const expressRoutes = mounted();
    expect(expressRoutes.length).toBeGreaterThan(50);
    const beforeExpress = operations.filter((operation) => bareRoutes.some((route) => operation.split(' ')[1]!.startsWith(`${route.prefix}/`)));
    expect(beforeExpress.length).toBeGreaterThan(0);
    for (const route of bareRoutes) expect(beforeExpress.some((operation) => operation.includes(` ${route.prefix}/`))).toBe(true);
    expect([...expressRoutes, ...beforeExpress].sort()).toEqual([...operations].sort());
  });

  it('gives every operation its scope, security, summary and error codes from the one table', () => {
    for (const [name, operation] of documented()) {
      expect([name, typeof operation['summary']]).toEqual([name, 'string']);
      expect(operation).toHaveProperty('x-latchkey-scope');
      const scope = operation['x-latchkey-scope'];
      if (scope !== null) {
        const scopes = Array.isArray(scope) ? scope : [scope];
        expect(operation.security.filter((requirement) => requirement['apiKey']).map((requirement) => requirement['apiKey']![0])).toEqual(scopes);
      }
      const codes = Object.entries(operation.responses).flatMap(([status, response]) =>
        (response['x-latchkey-error-codes'] ?? []).map((code) => [code, Number(status)] as const),
      );
      expect(codes.length).toBeGreaterThan(0);
      for (const [code, status] of codes) expect([name, code, ERROR_CODES[code as keyof typeof ERROR_CODES]?.status]).toEqual([name, code, status]);
    }
  });

  it('puts the operator API under its own security scheme and tag, and the customer API behind an API key', () => {
    for (const [name, operation] of documented()) {
      const admin = name.split(' ')[1]!.startsWith('/admin');
      expect([name, admin && operation.security.every((requirement) => 'adminToken' in requirement)]).toEqual([name, admin]);
      expect([name, (operation['tags'] as string[]).includes('Operator')]).toEqual([name, admin]);
    }
    expect(documented().get('GET /connections/{connectionId}')?.security).toEqual([{ apiKey: ['environment:connections:read'] }]);
    expect(documented().get('GET /openapi.json')?.security).toEqual([]);
  });

  it('lists the refusals of access and input beside the route own errors', () => {
    const codes = (name: string) => Object.values(documented().get(name)!.responses).flatMap((response) => response['x-latchkey-error-codes'] ?? []);
    expect(codes('POST /integrations')).toEqual(
      expect.arrayContaining(['unknown_api_key', 'forbidden', 'invalid_body', 'payload_too_large', 'duplicate_provider_config', 'service_unavailable']),
    );
    expect(codes('GET /proxy/{path}')).toEqual(expect.arrayContaining(['invalid_headers', 'upstream_not_allowed', 'forbidden']));
    expect(codes('POST /admin/environments')).toEqual(expect.arrayContaining(['unknown_admin_token', 'duplicate_environment']));
    expect(codes('POST /admin/environments')).not.toContain('forbidden');
    // An end user's OAuth start hears a refused token-endpoint address as one that gave no answer
    // (the vault's forEndUser); the customer's own read still names the refusal.
    for (const name of ['GET /oauth/connect/{integration}', 'POST /oauth/connect/{integration}']) {
      expect(codes(name)).toContain('refresh_token_external_error');
      expect(codes(name)).not.toContain('upstream_not_allowed');
    }
    expect(codes('GET /connections/{connectionId}')).toEqual(expect.arrayContaining(['refresh_token_external_error', 'upstream_not_allowed']));
  });

  it('gives every success answer a route has, each with its own status and body', () => {
    const responses = (name: string) => documented().get(name)!.responses as Record<string, { description: string; content?: Record<string, { schema?: Record<string, unknown> }> }>;
    const json = (name: string, status: number) => responses(name)[String(status)]?.content?.['application/json']?.schema;
    // The action's output (any JSON), or with X-Async the queued run's handle.
    expect(json('POST /action/trigger', 200)).toEqual({});
    expect(json('POST /action/trigger', 202)).toMatchObject({ required: ['id', 'statusUrl'], properties: { id: { type: 'string' }, statusUrl: { type: 'string' } } });
    expect(responses('POST /action/trigger')['202']!.description).toMatch(/X-Async/);
    expect(json('GET /action/{id}', 200)).toEqual({});
    expect(json('GET /action/{id}', 202)).toMatchObject({
      required: ['id', 'status', 'statusUrl'],
      properties: { status: { type: 'string', enum: ['queued', 'running'] } },
    });
    expect(json('GET /integrations', 200)).toMatchObject({ required: ['data'], properties: { data: { type: 'array', items: { required: ['unique_key', 'provider', 'logo', 'created_at', 'updated_at'] } } } });
    const integration = json('GET /integrations/{uniqueKey}', 200) as { properties: { data: { properties: Record<string, unknown>; required: string[] } } };
    expect(Object.keys(integration.properties.data.properties)).toEqual(expect.arrayContaining(['unique_key', 'forward_webhooks', 'webhook_url', 'webhookSecret', 'credentials']));
    expect(integration.properties.data.required).not.toContain('webhook_url');
  });

  it('marks a request body optional where the route reads a request without one as {}, and required elsewhere', () => {
    const body = (name: string) => (documented().get(name)!['requestBody'] as { required: boolean }).required;
    expect(body('POST /connect/sessions')).toBe(false);
    expect(body('PATCH /integrations/{uniqueKey}')).toBe(false);
    expect(body('POST /connect/sessions/reconnect')).toBe(true);
    expect(body('POST /integrations')).toBe(true);
  });

  it('refuses a route that gives two answers one status', () => {
    const [trigger] = routes.filter((route) => route.path === '/action/trigger');
    const twice = { ...trigger!, doc: { ...trigger!.doc, otherAnswers: [...(trigger!.doc.otherAnswers ?? []), { status: 200, when: 'again' }] } };
    expect(() => buildOpenApiDocument([twice], [])).toThrow(/POST \/action\/trigger.*200/);
  });

  it('gives the deprecated GET /connection/{connectionId} the query it reads and the legacy bodies it answers', () => {
    const operation = documented().get('GET /connection/{connectionId}')!;
    const parameters = operation['parameters'] as Array<{ name: string; in: string; required: boolean }>;
    expect(parameters.filter((parameter) => parameter.in === 'query').map(({ name, required }) => [name, required])).toEqual([
      ['provider_config_key', true],
      ['force_refresh', false],
      ['refresh_token', false],
      ['refresh_vendor_app_jwt_token', false],
    ]);
    const responses = operation.responses as Record<string, { content: Record<string, { schema: Record<string, unknown> }> }>;
    for (const status of ['400', '404']) {
      expect([status, responses[status]!.content['application/json']!.schema]).toEqual([
        status,
        { type: 'object', properties: { message: { type: 'string' } }, required: ['message'], additionalProperties: false },
      ]);
    }
    expect(responses['424']!.content['application/json']!.schema).toEqual({ $ref: '#/components/schemas/Error' });
    expect(responses['401']!.content['application/json']!.schema).toEqual({ $ref: '#/components/schemas/Error' });
  });

  it('is what docs/openapi.json holds (run `npm run openapi` after changing a route)', () => {
    const committed = readFileSync(new URL('../../../../docs/openapi.json', import.meta.url), 'utf8');
    expect(committed === openApiText(routes, bareRoutes)).toBe(true);
  });

  it('covers the methods a client may send, and no `all` route', () => {
    for (const route of routes) expect(METHODS).toContain(route.method);
  });
});
