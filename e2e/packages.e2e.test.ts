import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot, startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { startStack, type Stack } from './support/stack.js';

/**
 * The published packages as a customer gets them: packed, installed in a folder outside the
 * repository, a project scaffolded with `latchkey init`, deployed with `latchkey deploy`, and its
 * example action called with the packed client. Only the npm registry's own packages (esbuild,
 * got) come from npm, from its cache where it has them; ours come from the packed files.
 */

const PACKAGES = ['functions', 'client', 'cli'] as const;

let stack: Stack;
let upstream: TestUpstreamApi;
let work: string;

/** The environment of npm and the CLI: ours without npm's own variables (a run under `npm test` sets them for this repository). */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));
  return { ...env, ...extra };
}

async function run(command: string, args: string[], cwd: string, extra: Record<string, string> = {}): Promise<{ stdout: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: cleanEnv(extra), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code === 0) resolve({ stdout, ms: Date.now() - started });
      else reject(new Error(`${command} ${args.join(' ')} (in ${cwd}) exited with ${code}:\n${stdout}\n${stderr}`));
    });
  });
}

const INSTALL = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

beforeAll(async () => {
  for (const name of PACKAGES) {
    if (!existsSync(join(repoRoot(), 'packages', name, 'dist', 'index.js'))) throw new Error(`packages/${name} is not built: run \`make build\` first`);
  }
  work = mkdtempSync(join(tmpdir(), 'latchkey-packages-'));
  upstream = await startUpstreamApi();
  stack = await startStack({ env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32' } });
  // The folder `latchkey init` names the example integration after.
  await seedApiKeyConnection(stack, 'example', 'customer-1', 'upstream-key-1');
}, 120_000);

afterAll(async () => {
  await stack?.dispose();
  await upstream?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the published packages', () => {
  it('pack, install outside the repository, scaffold with latchkey init, deploy with latchkey deploy, and the example action answers', async () => {
    const timings: Record<string, number> = {};

    // npm pack: each tarball holds its built code, its manifest and its README, no tests or sources.
    const packed = await run('npm', ['pack', '--json', '--pack-destination', work, ...PACKAGES.flatMap((name) => ['-w', `@latchkey/${name}`])], repoRoot());
    timings['pack'] = packed.ms;
    const tarballs = JSON.parse(packed.stdout) as Array<{ name: string; filename: string; files: Array<{ path: string }> }>;
    expect(tarballs.map((tarball) => tarball.name).sort()).toEqual(['@latchkey/cli', '@latchkey/client', '@latchkey/functions']);
    for (const tarball of tarballs) {
      const files = tarball.files.map((file) => file.path);
      expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts']));
      expect(files.filter((file) => /\.test\.|^src\/|\.tsbuildinfo$/.test(file))).toEqual([]);
      const manifest = JSON.parse(readFileSync(join(repoRoot(), 'packages', tarball.name.split('/')[1]!, 'package.json'), 'utf8')) as Record<string, any>;
      expect(manifest['private']).toBeUndefined();
      expect(Object.keys(manifest['dependencies'] ?? {}).filter((name) => name.startsWith('@latchkey/') && name !== '@latchkey/functions')).toEqual([]);
    }
    const tarball = (name: string) => join(work, tarballs.find((item) => item.name === `@latchkey/${name}`)!.filename);

    // A customer's tools folder, outside the repository: the three packages from the packed files.
    const tools = join(work, 'tools');
    mkdirSync(tools);
    writeFileSync(join(tools, 'package.json'), JSON.stringify({ name: 'tools', private: true, type: 'module' }));
    timings['install tools'] = (await run('npm', [...INSTALL, ...PACKAGES.map(tarball)], tools)).ms;

    const init = await run('npx', ['--no-install', 'latchkey', 'init', 'app'], tools);
    timings['latchkey init'] = init.ms;
    const app = join(tools, 'app');
    expect(init.stdout).toContain('created functions/example/hello.ts');
    const scaffold = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(scaffold.dependencies).toEqual({ '@latchkey/functions': '^0.1.0' });
    expect(existsSync(join(app, 'functions', 'example', 'contacts.ts'))).toBe(true);
    // init writes into an empty or missing folder only.
    await expect(run('npx', ['--no-install', 'latchkey', 'init', 'app'], tools)).rejects.toThrow(/is not empty/);

    // The project's own dependencies; the SDK and the CLI are not on the registry, so from the packed files.
    timings['install project'] = (await run('npm', [...INSTALL, tarball('functions'), tarball('cli')], app)).ms;

    // The scaffold's own deploy script, as its README says to run it.
    const deployed = await run('npm', ['run', '--silent', 'deploy'], app, { SERVICE_SECRET_KEY_DEV: stack.bootstrapKey, LATCHKEY_HOST: stack.url });
    timings['latchkey deploy'] = deployed.ms;
    expect(deployed.stdout).toContain('example: action hello');
    expect(deployed.stdout).toContain('example: version 1 deployed');

    // The example action through the gateway, with the packed client.
    const script = `import { Latchkey } from '@latchkey/client';
const latchkey = new Latchkey({ host: process.env.LATCHKEY_HOST, apiKey: process.env.LATCHKEY_KEY });
const result = await latchkey.triggerAction('example', 'customer-1', 'hello', { name: 'Ada' });
process.stdout.write(JSON.stringify(result));\n`;
    writeFileSync(join(tools, 'call.mjs'), script);
    const called = await run(process.execPath, ['call.mjs'], tools, { LATCHKEY_HOST: stack.url, LATCHKEY_KEY: stack.bootstrapKey });
    timings['call the action'] = called.ms;
    expect(JSON.parse(called.stdout)).toEqual({ greeting: 'Hello, Ada!', connection: 'customer-1' });

    process.stdout.write(`packages e2e timings (ms): ${JSON.stringify(timings)}\n`);
  }, 240_000);
});
