import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '@latchkey/testing';

/** The example functions the e2e tests deploy: `e2e/functions/<integration>/*.ts`. */
export const FUNCTIONS_DIR = join(repoRoot(), 'e2e', 'functions');

/** Runs the built `latchkey` CLI as a user would; resolves with its exit code and output. */
export function runCli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // The command npx runs: the committed bin shim, which loads the built CLI.
  const cli = join(repoRoot(), 'packages', 'cli', 'bin', 'latchkey.js');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Deploys `dir` to the stack's `dev` environment with the CLI and its secret key, as a customer's CI would; throws with the CLI's output when it fails. */
export async function deployWithCli(dir: string, stack: { url: string; bootstrapKey: string }): Promise<void> {
  const deployed = await runCli(['deploy', dir, '--environment', 'dev', '--host', stack.url], { SERVICE_SECRET_KEY_DEV: stack.bootstrapKey });
  if (deployed.code !== 0) throw new Error(`latchkey deploy failed:\n${deployed.stdout}\n${deployed.stderr}`);
}

export { eventually } from '@latchkey/testing';
