import { join } from 'node:path';
import { repoRoot, runToExit, type ProcessOutcome } from '@latchkey/testing';

/** The example functions the e2e tests deploy: `e2e/functions/<integration>/*.ts`. */
export const FUNCTIONS_DIR = join(repoRoot(), 'e2e', 'functions');

/** Runs the built `latchkey` CLI as a user would; resolves with its exit code and output. */
export function runCli(args: string[], env: Record<string, string>): Promise<ProcessOutcome> {
  // The command npx runs: the committed bin shim, which loads the built CLI.
  return runToExit(process.execPath, [join(repoRoot(), 'packages', 'cli', 'bin', 'latchkey.js'), ...args], { ...process.env, ...env }, 120_000);
}

/** Deploys `dir` to the stack's `dev` environment with the CLI and its secret key, as a customer's CI would; throws with the CLI's output when it fails. */
export async function deployWithCli(dir: string, stack: { url: string; bootstrapKey: string }): Promise<void> {
  const deployed = await runCli(['deploy', dir, '--environment', 'dev', '--host', stack.url], { SERVICE_SECRET_KEY_DEV: stack.bootstrapKey });
  if (deployed.code !== 0) throw new Error(`latchkey deploy failed:\n${deployed.stdout}\n${deployed.stderr}`);
}

export { eventually } from '@latchkey/testing';
