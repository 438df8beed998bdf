import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleSource } from '@latchkey/compiler';
import { startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import type { NatsConnection } from '@nats-io/transport-node';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from '../support/providers.js';
import { http, startStack, type Stack } from '../support/stack.js';

/**
 * Customer code is hostile: the attacks of the functions area (bundler, dry runs, sandbox), each
 * sent as an attacker would, with canaries planted where they aim (the sync-scheduler's and the
 * action-runner's environment, a file on the server's disk, a connection's credentials).
 */

const canary = (what: string) => `canary-${what}-${randomBytes(12).toString('hex')}`;
const ENV_CANARY = canary('env');
const FILE_CANARY = canary('file');
const CREDENTIAL_CANARY = canary('credential');

let stack: Stack;
let upstream: TestUpstreamApi;
let canaryFile: string;
let canaryJsonFile: string;
let spy: NatsConnection;
/** Every NATS message seen during the run, as text: the env and file canaries must never be in one. */
const natsTraffic: string[] = [];
/** Every answer an attacker got, as text. */
const answers: string[] = [];

async function call(method: string, path: string, token: string, body?: unknown) {
  const response = await http(`${stack.url}${path}`, { method, token, ...(body === undefined ? {} : { body }) });
  answers.push(JSON.stringify(response.json ?? null));
  return response;
}

async function keyWith(scopes: string[]): Promise<string> {
  const created = await http(`${stack.url}/admin/environments/dev/api-keys`, { method: 'POST', token: stack.adminToken, body: { display_name: scopes.join(' '), scopes } });
  if (created.status !== 201) throw new Error(`key: ${created.status} ${JSON.stringify(created.json)}`);
  return created.json.data.secret as string;
}

/** Neither the environment's nor the file's canary, nor a line of /etc/passwd, is in `text`. */
function expectNoServerSecrets(text: string) {
  expect(text).not.toContain(ENV_CANARY);
  expect(text).not.toContain(FILE_CANARY);
  expect(text).not.toMatch(/root:x?:0:0/);
  expect(text).not.toContain('LATCHKEY_CANARY');
  expect(text).not.toContain('ENCRYPTION_KEYS');
}

const action = (body: string, name = 'probe') =>
  `import { defineAction } from '@latchkey/functions';\nconst host = globalThis as any;\nexport default defineAction({ name: '${name}', exec: async (ctx) => { ${body} } });\n`;

let compileKey: string;
let dryRunKey: string;
const dryRun = (source: string, token = dryRunKey) => call('POST', '/functions/dryruns', token, { provider_config_key: 'api', connection_id: 'conn-1', source });
/** A dry run of an action whose `exec` body is `body`. */
const dryRunBody = (body: string, token = dryRunKey) => dryRun(action(body), token);

beforeAll(async () => {
  upstream = await startUpstreamApi();
  const dir = mkdtempSync(join(tmpdir(), 'latchkey-canary-'));
  canaryFile = join(dir, 'secret.txt');
  canaryJsonFile = join(dir, 'secret.json');
  writeFileSync(canaryFile, `${FILE_CANARY}\n`);
  writeFileSync(canaryJsonFile, JSON.stringify({ secret: FILE_CANARY }));
  const canaryEnv = { LATCHKEY_CANARY_SECRET: ENV_CANARY };
  stack = await startStack({
    // No case here means to meet FUNCTION_TIMEOUT_MS (the floods end at the memory limit): 4 s
    // was a bet on a loaded machine.
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32', FUNCTION_TIMEOUT_MS: '10000', FUNCTION_MEMORY_MB: '64' },
    serviceEnv: { 'sync-scheduler': canaryEnv, 'action-runner': canaryEnv, gateway: canaryEnv },
  });
  spy = await stack.connectNats();
  spy.subscribe('>', { callback: (_error, msg) => void natsTraffic.push(new TextDecoder().decode(msg.data)) });
  await seedApiKeyConnection(stack, 'api', 'conn-1', CREDENTIAL_CANARY);
  compileKey = await keyWith(['environment:functions:compile']);
  dryRunKey = await keyWith(['environment:functions:dryrun', 'environment:connections:read', 'environment:integrations:read', 'environment:proxy']);
}, 120_000);

afterAll(async () => {
  try {
    await spy?.drain();
    for (const text of [...answers, ...natsTraffic]) expectNoServerSecrets(text);
    for (const service of stack?.services ?? []) expectNoServerSecrets(service.output());
  } finally {
    await stack?.dispose();
    await upstream?.close();
  }
});

describe('case 1: the bundler resolves only the submitted source and @latchkey/functions', () => {
  const attacks = () => {
    const up = '../'.repeat(16);
    return {
      'import of /proc/self/environ as json': `import x from '/proc/self/environ' with { type: 'json' };\nexport default x;\n`,
      'import of /proc/self/environ as text': `import x from '/proc/self/environ' with { type: 'text' };\nexport default x;\n`,
      'import of /etc/passwd as text': `import x from '/etc/passwd' with { type: 'text' };\nexport default x;\n`,
      'import of /etc/passwd as file': `import x from '/etc/passwd' with { type: 'file' };\nexport default x;\n`,
      'import of /etc/passwd as binary': `import x from '/etc/passwd' with { type: 'binary' };\nexport default x;\n`,
      'import of a file on disk as text': `import x from '${canaryFile}' with { type: 'text' };\nexport default x;\n`,
      'import of a JSON file on disk, no attribute': `import x from '${canaryJsonFile}';\nexport default x;\n`,
      'relative ../../ import of a file on disk': `import x from '${up}${canaryFile.slice(1)}' with { type: 'text' };\nexport default x;\n`,
      'relative ../../ import of a JSON file, no attribute': `import x from '${up}${canaryJsonFile.slice(1)}';\nexport default x;\n`,
      'relative import of the service\'s own code': `import * as x from '../dist/config.js';\nexport default x;\n`,
      'triple-slash reference to /etc/passwd': `/// <reference path="/etc/passwd" />\nimport { defineAction } from '@latchkey/functions';\nexport default defineAction({ name: 'r', exec: () => 1 });\n`,
      'triple-slash reference to a file on disk': `/// <reference path="${canaryFile}" />\nimport { defineAction } from '@latchkey/functions';\nexport default defineAction({ name: 'r', exec: () => 1 });\n`,
      'require of fs': `const fs = require('fs');\nexport default fs.readFileSync('${canaryFile}', 'utf8');\n`,
      'require of child_process': `const cp = require('child_process');\nexport default cp.execSync('env').toString();\n`,
      'dynamic import of node:fs': `export default import('node:fs').then((fs) => fs.readFileSync('/proc/self/environ', 'utf8'));\n`,
    };
  };

  test('case 1: compile of a source importing server files, environ or Node built-ins is refused and quotes nothing but the source', async () => {
    for (const [attack, source] of Object.entries(attacks())) {
      const response = await call('POST', '/functions/compile', compileKey, { source });
      expect({ attack, status: response.status, success: response.json.success }).toEqual({ attack, status: 200, success: false });
      expectNoServerSecrets(JSON.stringify(response.json));
      // A diagnostic may quote the submitted source only.
      for (const diagnostic of response.json.diagnostics as Array<{ text?: string; message: string }>) {
        if (diagnostic.text !== undefined) expect(source.split('\n')).toContain(diagnostic.text);
      }
    }
  }, 60_000);

  test('case 1: a dry run of such a source fails to compile and returns nothing of the server', async () => {
    for (const [attack, source] of Object.entries(attacks())) {
      const response = await dryRun(source);
      expect({ attack, status: response.status, code: response.json.error?.code }).toEqual({ attack, status: 400, code: 'function_compilation_failed' });
      expectNoServerSecrets(JSON.stringify(response.json));
    }
  }, 60_000);

  test('case 1: a deployed bundle that smuggles require, process, import() or eval reads nothing in the sandbox', async () => {
    // A bundle as a modified CLI could upload it: its code reaches for Node at run time.
    const built = await bundleSource({
      source: action(`
        const out: Record<string, string> = {};
        const attempt = async (what: string, fn: () => unknown) => { try { out[what] = String(await fn()); } catch (error) { out[what] = 'refused: ' + (error as Error).message; } };
        await attempt('require', () => host['req' + 'uire']('fs').readFileSync('${canaryFile}', 'utf8'));
        await attempt('process', () => JSON.stringify(host['pro' + 'cess'].env));
        await attempt('import', () => (0, eval)("import('node:fs')").then((fs: any) => fs.readFileSync('/proc/self/environ', 'utf8')));
        await attempt('function', () => new Function('return typeof require + typeof process')());
        return out;`, 'smuggle'),
    });
    expect(built.ok).toBe(true);
    const bundle = `${built.ok ? built.bundle : ''}\n;try { module.exports.default.leak = require('fs').readFileSync('/proc/self/environ', 'utf8'); } catch {}\n`;
    const deployed = await call('POST', '/functions/deployments', stack.bootstrapKey, {
      provider_config_key: 'api',
      functions: [{ description: { type: 'action', name: 'smuggle', has_input_schema: false }, bundle }],
    });
    expect(deployed.status).toBe(201);
    const run = await call('POST', '/functions/dryruns', dryRunKey, { provider_config_key: 'api', connection_id: 'conn-1', function_name: 'smuggle' });
    expect(run.status).toBe(200);
    expect(run.json.success).toBe(true);
    expect(run.json.output).toEqual({
      require: expect.stringMatching(/^refused/),
      process: expect.stringMatching(/^refused/),
      import: expect.stringMatching(/^refused/),
      function: 'undefinedundefined',
    });
    expectNoServerSecrets(JSON.stringify(run.json));
  }, 60_000);
});

describe('case 4: a dry run does no more than its key could through the API', () => {
  const readConnection = action(`const connection = await ctx.getConnection(); return { id: connection.connection_id, credentials: (connection as any).credentials ?? null };`, 'reader');

  test('case 4: a key with only environment:functions:dryrun is refused (403) before anything runs', async () => {
    const onlyDryRun = await keyWith(['environment:functions:dryrun']);
    const response = await dryRun(readConnection, onlyDryRun);
    expect(response.status).toBe(403);
    expect(response.json.error.code).toBe('forbidden');
    expect(JSON.stringify(response.json)).not.toContain(CREDENTIAL_CANARY);
  }, 60_000);

  test('case 4: with the dry-run profile (connections:read, no read_credentials) ctx.getConnection has no credentials', async () => {
    const response = await dryRun(readConnection);
    expect(response.status).toBe(200);
    expect(response.json).toMatchObject({ success: true, output: { id: 'conn-1', credentials: null } });
    expect(JSON.stringify(response.json)).not.toContain(CREDENTIAL_CANARY);
  }, 60_000);

  test('case 4: a deployed function dry-run by name is held to the calling key too', async () => {
    const built = await bundleSource({ source: readConnection });
    expect(built.ok).toBe(true);
    const deployed = await call('POST', '/functions/deployments', stack.bootstrapKey, {
      provider_config_key: 'api',
      functions: [{ description: { type: 'action', name: 'reader', has_input_schema: false }, bundle: built.ok ? built.bundle : '' }],
    });
    expect(deployed.status).toBe(201);
    const response = await call('POST', '/functions/dryruns', dryRunKey, { provider_config_key: 'api', connection_id: 'conn-1', function_name: 'reader' });
    expect(response.json).toMatchObject({ success: true, output: { id: 'conn-1', credentials: null } });
    expect(JSON.stringify(response.json)).not.toContain(CREDENTIAL_CANARY);
  }, 60_000);

  test('case 4: ctx calls beyond the key\'s scopes are forbidden (environment variables, the integration\'s webhook secret)', async () => {
    const variables = await dryRunBody(`return await ctx.getEnvironmentVariables();`);
    expect(variables.json).toMatchObject({ success: false, error: { code: 'forbidden' } });
    expect(variables.json.error.message).toMatch(/environment:variables:read/);
    const integration = await dryRunBody(`const found = await ctx.getIntegration(); return Object.keys(found).sort();`);
    expect(integration.json.success).toBe(true);
    expect(integration.json.output).not.toContain('webhookSecret');
  }, 60_000);

  // The secret lets its holder sign provider webhooks that Latchkey forwards as genuine and that
  // run syncs' onWebhook: a credential, as the sandbox already treated it.
  test("case 4: the integration's webhook secret, kept from the sandbox without integrations:read_credentials, is kept from the API too", async () => {
    const plain = await call('GET', '/integrations/api?include=webhook', dryRunKey);
    expect(plain.status).toBe(200);
    expect(plain.json.data.webhook_url).toMatch(/\/webhook\/.+\/api$/);
    expect(plain.json.data).not.toHaveProperty('webhookSecret');
    const reader = await keyWith(['environment:integrations:read_credentials']);
    const full = await call('GET', '/integrations/api?include=webhook', reader);
    expect(full.status).toBe(200);
    expect(full.json.data.webhookSecret).toMatch(/^[0-9a-f]{64}$/);
  }, 60_000);

  test('case 4: a key with connections:read_credentials reads credentials, as GET /connection would give them', async () => {
    const reader = await keyWith(['environment:functions:dryrun', 'environment:connections:read_credentials', 'environment:integrations:read', 'environment:proxy']);
    const response = await dryRun(readConnection, reader);
    expect(response.json).toMatchObject({ success: true, output: { id: 'conn-1', credentials: { apiKey: CREDENTIAL_CANARY } } });
  }, 60_000);
});

describe('case 6: the sandbox\'s memory limit holds, WebAssembly included', () => {
  test('case 6: WebAssembly is not in the isolate, so WebAssembly.Memory cannot grow past the limit; the runner answers the next run', async () => {
    const probe = await dryRunBody(`return typeof host.WebAssembly;`);
    expect(probe.json).toMatchObject({ success: true, output: 'undefined' });
    const grow = await dryRunBody(`const memory = new (host.WebAssembly as any).Memory({ initial: 1, maximum: 65536 }); memory.grow(65535); return memory.buffer.byteLength;`);
    expect(grow.json).toMatchObject({ success: false, error: { code: 'function_failed' } });
    expect((await dryRunBody('return 1 + 1;')).json).toMatchObject({ success: true, output: 2 });
  }, 60_000);

  test('case 6: an ArrayBuffer flood and an Array flood end with function_memory_exceeded; the runner answers the next run', async () => {
    const buffers = await dryRunBody(`const hoard: ArrayBuffer[] = []; for (;;) hoard.push(new ArrayBuffer(4 * 1024 * 1024));`);
    expect(buffers.json).toMatchObject({ success: false, error: { code: 'function_memory_exceeded' } });
    const caught = await dryRunBody(`const hoard: ArrayBuffer[] = []; try { for (;;) hoard.push(new ArrayBuffer(4 * 1024 * 1024)); } catch { hoard.length = 0; } return 'survived';`);
    expect(caught.json.success === false ? caught.json.error.code : caught.json.output).toMatch(/^(function_memory_exceeded|survived)$/);
    const arrays = await dryRunBody(`const hoard: number[][] = []; for (;;) hoard.push(new Array(100000).fill(hoard.length));`);
    expect(arrays.json).toMatchObject({ success: false, error: { code: 'function_memory_exceeded' } });
    expect((await dryRunBody('return 1 + 1;')).json).toMatchObject({ success: true, output: 2 });
    const runner = stack.services.find((service) => service.service === 'action-runner')!;
    expect(runner.child.exitCode).toBeNull();
  }, 60_000);
});

describe('case 18: an answer larger than a NATS message arrives whole, quickly', () => {
  test('case 18: a dry run answering 3 MB (over max_payload) gets its whole answer, not a 100 s wait', async () => {
    const started = Date.now();
    const response = await dryRunBody(`return 'x'.repeat(3 * 1024 * 1024);`);
    expect(response.status).toBe(200);
    expect(response.json.success).toBe(true);
    expect(response.json.output).toHaveLength(3 * 1024 * 1024);
    expect(Date.now() - started).toBeLessThan(20_000);
    answers.pop(); // 3 MB of x: nothing to look for in it
  }, 60_000);
});
