import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { repoRoot, startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { deployWithCli } from './support/functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { createScopedKey, startStack, type Stack } from './support/stack.js';

/** The MCP endpoint, driven by the official MCP client over its Streamable HTTP transport. */
let stack: Stack;
let upstream: TestUpstreamApi;
let mcpKey: string;
let actionsOnlyKey: string;
const clients: Client[] = [];

async function connectClient(headers: Record<string, string>, key = mcpKey): Promise<Client> {
  const client = new Client({ name: 'latchkey-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}`, ...headers } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

const forConnection = { 'connection-id': 'c1', 'provider-config-key': 'mcp' };

/** One JSON-RPC message posted as an MCP client would, for the cases the SDK client hides. */
function post(body: unknown, headers: Record<string, string> = forConnection, key = mcpKey) {
  return postText(JSON.stringify(body), headers, key);
}

/** `text` posted to `/mcp` as it is (JSON that JSON.stringify could not write, say). */
function postText(text: string, headers: Record<string, string> = forConnection, key = mcpKey) {
  return fetch(`${stack.url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: text,
  });
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- test answers are read loosely
const json = async (response: Response): Promise<any> => response.json();

beforeAll(async () => {
  upstream = await startUpstreamApi();
  stack = await startStack({
    // Only `spin` means to meet FUNCTION_TIMEOUT_MS: 3 s was a bet on a loaded machine for the
    // others (`huge` writes 11 MB before its size is refused).
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32', FUNCTION_TIMEOUT_MS: '10000' },
  });
  await seedApiKeyConnection(stack, 'mcp', 'c1', 'key-1');
  await deployWithCli(join(repoRoot(), 'e2e', 'mcp-functions'), stack);
  mcpKey = await createScopedKey(stack, ['environment:mcp']);
  actionsOnlyKey = await createScopedKey(stack, ['environment:actions:execute']);
}, 180_000);

afterAll(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  await stack?.dispose();
  await upstream?.close();
});

describe('/mcp', () => {
  it('initializes and lists one tool per deployed action, with its description and input schema', async () => {
    const client = await connectClient(forConnection);
    expect(client.getServerVersion()).toEqual({ name: 'latchkey', version: '1.0.0' });
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    expect([...byName.keys()].sort()).toEqual(['area', 'double', 'echo', 'fail', 'huge', 'large', 'spin', 'whoami']);
    expect(byName.get('double')).toMatchObject({
      description: 'Doubles a whole number',
      inputSchema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
    });
    // An action without a schema takes any object.
    expect(byName.get('whoami')?.inputSchema).toEqual({ type: 'object' });
  });

  it('lists an action whose input is not an object as a tool the client accepts, and calls it with that input', async () => {
    const client = await connectClient(forConnection);
    // The SDK client checks every tool's input schema is an object: one that is not failed the whole list.
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    expect(byName.get('double')?.inputSchema).toMatchObject({ type: 'object', properties: { n: { type: 'integer' } } });
    // A string is wrapped as the object's one property `input`.
    expect(byName.get('echo')?.inputSchema).toMatchObject({ type: 'object', properties: { input: { type: 'string', minLength: 1 } }, required: ['input'] });
    const echoed = await client.callTool({ name: 'echo', arguments: { input: 'hello' } });
    expect(echoed.isError).toBeFalsy();
    expect(echoed.structuredContent).toEqual({ echoed: 'hello' });
    expect((await client.callTool({ name: 'echo', arguments: { input: '' } })).isError).toBe(true);
    // A union of objects is an object already: it is typed so at its root and called as it is.
    const area = byName.get('area')?.inputSchema;
    expect(area).toMatchObject({ type: 'object', oneOf: [{ type: 'object' }, { type: 'object' }] });
    expect(area?.['properties']).toBeUndefined();
    expect((await client.callTool({ name: 'area', arguments: { shape: 'rectangle', width: 2, height: 3 } })).structuredContent).toEqual({ area: 6 });
  });

  it('calls a tool as POST /action/trigger runs the action, for the connection the headers name', async () => {
    const client = await connectClient(forConnection);
    const doubled = await client.callTool({ name: 'double', arguments: { n: 21 } });
    expect(doubled.isError).toBeFalsy();
    expect(doubled.structuredContent).toEqual({ doubled: 42 });
    expect(doubled.content).toEqual([{ type: 'text', text: JSON.stringify({ doubled: 42 }) }]);
    const who = await client.callTool({ name: 'whoami', arguments: {} });
    expect(who.structuredContent).toEqual({ connection: 'c1', integration: 'mcp' });
  });

  it('answers bad input, a throwing action, a timeout, an output over the limit and an unknown tool as tool errors', async () => {
    const client = await connectClient(forConnection);
    const errorOf = async (name: string, args: Record<string, unknown>) => {
      const result = await client.callTool({ name, arguments: args });
      expect(result.isError).toBe(true);
      return (result.structuredContent as { error: { code: string; message: string } }).error;
    };
    expect((await errorOf('double', { n: 'seven' })).code).toBe('invalid_body');
    expect(await errorOf('fail', {})).toEqual({ code: 'function_failed', message: expect.stringContaining('the upstream said no') });
    expect((await errorOf('spin', {})).code).toBe('function_timed_out');
    expect((await errorOf('huge', {})).code).toBe('action_output_too_large');
    expect((await errorOf('nothing-deployed', {})).code).toMatch(/^unknown_/);
  }, 60_000);

  it('refuses a JSON-RPC batch before running any of it, so one request runs one message', async () => {
    const call = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'whoami', arguments: {} } });
    const batch = await post([call(1), call(2)]);
    expect(batch.status).toBe(400);
    const body = await json(batch);
    expect(body.error.code).toBe('invalid_body');
    expect(body.error.errors).toEqual([expect.objectContaining({ path: '', message: expect.stringMatching(/batches are not accepted/) })]);
    // One message still runs.
    expect((await post(call(3))).status).toBe(200);
  });

  it("refuses a tool's arguments nested 20,000 levels deep with invalid_body, as /action/trigger does", async () => {
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    const refused = await postText(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"whoami","arguments":{"deep":${deep}}}}`);
    expect(refused.status).toBe(400);
    expect((await json(refused)).error.code).toBe('invalid_body');
  });

  it("answers an output over what one MCP answer carries as a tool error, although /action/trigger serves it", async () => {
    const client = await connectClient(forConnection);
    const result = await client.callTool({ name: 'large', arguments: {} });
    expect(result.isError).toBe(true);
    expect((result.structuredContent as { error: { code: string; message: string } }).error).toEqual({
      code: 'action_output_too_large',
      message: expect.stringContaining('MCP'),
    });
    const served = await fetch(`${stack.url}/action/trigger`, {
      method: 'POST',
      headers: { authorization: `Bearer ${actionsOnlyKey}`, 'content-type': 'application/json', ...forConnection },
      body: JSON.stringify({ action_name: 'large' }),
    });
    expect(served.status).toBe(200);
    expect((await served.arrayBuffer()).byteLength).toBeGreaterThan(2 * 1024 * 1024);
  }, 60_000);

  it('speaks the protocol versions agents use: 2025-03-26, 2025-06-18 and the current one', async () => {
    for (const version of ['2025-03-26', '2025-06-18', '2025-11-25']) {
      const response = await post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
      });
      expect(response.status).toBe(200);
      // Stateless: no session to pin a client to one replica.
      expect(response.headers.get('mcp-session-id')).toBeNull();
      expect((await json(response)).result.protocolVersion).toBe(version);
    }
  });

  it('refuses a key without environment:mcp before anything runs, and missing or unknown connections with their codes', async () => {
    const noScope = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, forConnection, actionsOnlyKey);
    expect(noScope.status).toBe(403);
    expect((await json(noScope)).error.code).toBe('forbidden');

    const missing = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, {});
    expect(missing.status).toBe(400);
    const missingBody = await json(missing);
    expect(missingBody.error.code).toBe('invalid_headers');
    expect(missingBody.error.errors.map((item: { path: string }) => item.path).sort()).toEqual(['connection-id', 'provider-config-key']);

    const unknownConnection = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'connection-id': 'nobody', 'provider-config-key': 'mcp' });
    expect(unknownConnection.status).toBe(404);
    expect((await json(unknownConnection)).error.code).toBe('unknown_connection');
    const unknownIntegration = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'connection-id': 'c1', 'provider-config-key': 'nothing' });
    expect(unknownIntegration.status).toBe(404);
    expect((await json(unknownIntegration)).error.code).toMatch(/^unknown_(connection|provider_config)$/);

    const get = await fetch(`${stack.url}/mcp`, { headers: { authorization: `Bearer ${mcpKey}`, accept: 'text/event-stream', ...forConnection } });
    expect(get.status).toBe(405);
    expect((await json(get)).error.code).toBe('method_not_allowed');
  });
});
