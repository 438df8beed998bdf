import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { actionContracts, functionsContracts, vaultContracts, type ActionOutput } from '@latchkey/contracts';
import { pullAll, pullStream } from '@latchkey/bus';
import { AppError } from '@latchkey/errors';
import { actionInputOf, toolInputOf } from '../../domain/mcp-tool-input.js';
import { actionTriggerWait, checkActionInput } from '../../http/action-call.js';
import { connectionHeaders } from '../../http/connection-headers.js';
import { defineRoute } from '../../http/define-route.js';
import type { GatewayDeps } from '../../http/deps.js';

/** The server's name and version in `initialize`. */
const SERVER_INFO = { name: 'latchkey', version: '1.0.0' };
/**
 * The most of an action's output one tool result carries. A result is held whole while it is
 * answered (the text, its parsed value as `structuredContent`, the JSON-RPC answer around both),
 * several times its size, where `POST /action/trigger` streams up to the 10 MB action limit; and
 * a model reading the result could not take more.
 */
const MAX_TOOL_OUTPUT_BYTES = 1024 * 1024;

interface Target {
  environment_id: string;
  connection_id: string;
  provider_config_key: string;
}

const outputTooLarge = (bytes: number) =>
  new AppError(
    'action_output_too_large',
    `The action answered ${bytes} bytes; an MCP tool result carries at most ${MAX_TOOL_OUTPUT_BYTES} (POST /action/trigger serves the whole output)`,
  );

/** The action's output as text, refused past `MAX_TOOL_OUTPUT_BYTES` before any of it is read. */
async function outputText(deps: GatewayDeps, output: ActionOutput): Promise<string> {
  if ('inline' in output) {
    const bytes = Buffer.byteLength(output.inline);
    if (bytes > MAX_TOOL_OUTPUT_BYTES) throw outputTooLarge(bytes);
    return output.inline;
  }
  if (output.bytes > MAX_TOOL_OUTPUT_BYTES) {
    // Unread: the action-runner is told at once that nobody will pull it.
    void pullStream(deps.bus, output.stream, deps.config.REQUEST_TIMEOUT_MS).return(undefined);
    throw outputTooLarge(output.bytes);
  }
  try {
    return (await pullAll(deps.bus, output.stream, deps.config.REQUEST_TIMEOUT_MS, MAX_TOOL_OUTPUT_BYTES)).toString('utf8');
  } catch (error) {
    // More arrived than the stream announced.
    if (error instanceof AppError && error.code === 'payload_too_large') throw outputTooLarge(output.bytes);
    throw error;
  }
}

/** The actions deployed for the connection's integration, each with its tool input. */
async function actionTools(deps: GatewayDeps, target: Target) {
  const actions = await deps.bus.request(functionsContracts.listActions, { environment_id: target.environment_id, provider_config_key: target.provider_config_key });
  return actions.map((action) => ({ ...action, ...toolInputOf(action.input_schema) }));
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
    const tools: Tool[] = (await actionTools(deps, target)).map((action) => ({
      name: action.name,
      ...(action.description === undefined ? {} : { description: action.description }),
      inputSchema: action.inputSchema as Tool['inputSchema'],
    }));
    return { tools };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    try {
      // An unknown tool runs as it is, for action.trigger to answer unknown_action.
      const tool = (await actionTools(deps, target)).find((action) => action.name === request.params.name);
      const input = actionInputOf(request.params.arguments, tool?.wrapped ?? false);
      checkActionInput(input);
      const reply = await deps.bus.request(
        actionContracts.trigger,
        { ...target, action_name: request.params.name, input, async: false },
        actionTriggerWait(deps.config, false),
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
 * One JSON-RPC message. A batch (an array, which protocol versions from 2025-06-18 no longer
 * have) is refused: the SDK would run up to 100 calls for one request and one rate-limit token,
 * holding every answer until the last is done.
 */
const oneMessage = z
  .record(z.string(), z.unknown(), { error: 'one JSON-RPC message, an object: batches are not accepted, send each message in its own request' })
  .describe('One JSON-RPC message; a batch (an array) is refused with 400 invalid_body');

/**
 * `POST /mcp`: a Model Context Protocol server over Streamable HTTP, stateless, so any gateway
 * replica answers any request. The connection is named by the `connection-id` and
 * `provider-config-key` headers, as on `/proxy`, and must exist before anything is listed or run.
 * The body is one JSON-RPC message, which the MCP SDK validates.
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
  schemas: { body: oneMessage },
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
