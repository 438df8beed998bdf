import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { MAX_ACTION_OUTPUT_BYTES, actionContracts, functionsContracts, vaultContracts, type ActionOutput } from '@latchkey/contracts';
import { pullAll } from '@latchkey/bus';
import { AppError } from '@latchkey/errors';
import { actionTriggerTimeoutMs, checkActionInput } from '../../http/action-call.js';
import { connectionHeaders } from '../../http/connection-headers.js';
import { defineRoute } from '../../http/define-route.js';
import type { GatewayDeps } from '../../http/deps.js';

/** The server's name and version in `initialize`. */
const SERVER_INFO = { name: 'latchkey', version: '1.0.0' };
/** What `tools/list` gives an action that declares no input schema: any object. */
const ANY_OBJECT = { type: 'object' } as const;

interface Target {
  environment_id: string;
  connection_id: string;
  provider_config_key: string;
}

async function outputText(deps: GatewayDeps, output: ActionOutput): Promise<string> {
  if ('inline' in output) return output.inline;
  return (await pullAll(deps.bus, output.stream, deps.config.REQUEST_TIMEOUT_MS, MAX_ACTION_OUTPUT_BYTES)).toString('utf8');
}

/** An action's failure as MCP reports a tool's: a result with `isError`, never a protocol error. */
function failedTool(error: unknown): CallToolResult {
  const { code, message } = error instanceof AppError ? error : { code: 'function_failed', message: 'The action failed' };
  return { isError: true, content: [{ type: 'text', text: `${code}: ${message}` }], structuredContent: { error: { code, message } } };
}

/**
 * One MCP server per request, for one connection: its tools are the actions deployed for the
 * connection's integration, and calling one runs it exactly as `POST /action/trigger` does.
 */
function serverFor(deps: GatewayDeps, target: Target): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const actions = await deps.bus.request(functionsContracts.listActions, { environment_id: target.environment_id, provider_config_key: target.provider_config_key });
    const tools: Tool[] = actions.map((action) => ({
      name: action.name,
      ...(action.description === undefined ? {} : { description: action.description }),
      inputSchema: (action.input_schema ?? ANY_OBJECT) as Tool['inputSchema'],
    }));
    return { tools };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    try {
      const input = request.params.arguments;
      checkActionInput(input);
      const reply = await deps.bus.request(
        actionContracts.trigger,
        { ...target, action_name: request.params.name, input, async: false },
        { timeoutMs: actionTriggerTimeoutMs(deps.config, false) },
      );
      if (reply.status !== 'done') throw new AppError('internal_error', 'The action was queued instead of run');
      const text = await outputText(deps, reply.output);
      const value: unknown = text === '' ? undefined : JSON.parse(text);
      return {
        content: [{ type: 'text', text }],
        // Structured output is an object by the protocol's rule; other values stay text.
        ...(value !== null && typeof value === 'object' && !Array.isArray(value) ? { structuredContent: value as Record<string, unknown> } : {}),
      };
    } catch (error) {
      return failedTool(error);
    }
  });
  return server;
}

/**
 * `POST /mcp`: a Model Context Protocol server over Streamable HTTP, stateless, so any gateway
 * replica answers any request. The connection is named by the `connection-id` and
 * `provider-config-key` headers, as on `/proxy`, and must exist before anything is listed or run.
 * The body is JSON-RPC, which the MCP SDK validates.
 */
export const mcpEndpoint = defineRoute({
  method: 'post',
  path: '/mcp',
  auth: 'api_key',
  scope: 'environment:mcp',
  doc: {
    summary: "A Model Context Protocol message (Streamable HTTP): the connection's actions as tools",
    headers: ['Connection-Id', 'Provider-Config-Key'],
    errors: ['unknown_connection', 'unknown_provider_config'],
  },
  schemas: { body: z.unknown() },
  handler: async ({ deps, key, body, req, res }) => {
    const where = connectionHeaders(req);
    const target = { environment_id: key.environmentId, ...where };
    await deps.bus.request(vaultContracts.resolveConnection, target);
    const server = serverFor(deps, target);
    // No session id generator: stateless, every message stands alone.
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    res.once('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    return { streamed: true };
  },
});

/** A stateless server keeps no stream to resume and no session to end: GET and DELETE are 405. */
function refusedMethod(method: 'get' | 'delete') {
  return defineRoute({
    method,
    path: '/mcp',
    auth: 'api_key',
    scope: 'environment:mcp',
    doc: { summary: 'Not served: the MCP server keeps no session or stream', status: 405, errors: ['method_not_allowed'] },
    schemas: {},
    handler: async (): Promise<never> => {
      throw new AppError('method_not_allowed', 'This MCP server is stateless: send every message with POST');
    },
  });
}
export const mcpGet = refusedMethod('get');
export const mcpDelete = refusedMethod('delete');
