#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { DeployError, deployDirectory } from './deploy.js';

const USAGE = `usage: latchkey deploy <dir> --environment <name> [--host <url>]

Bundles every function under <dir>/<integration>/ and deploys each integration's set.
The secret key comes from SERVICE_SECRET_KEY_<ENVIRONMENT> (upper case, non-alphanumerics as _);
the host from --host, else LATCHKEY_HOST, else http://localhost:3003.`;

/** `SERVICE_SECRET_KEY_<ENV>`: the spec's variable for command-line tools. */
export function keyVariable(environment: string): string {
  return `SERVICE_SECRET_KEY_${environment.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { environment: { type: 'string', short: 'e' }, host: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  const [command, dir] = positionals;
  if (values.help || command !== 'deploy' || !dir || !values.environment) {
    process.stderr.write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  const variable = keyVariable(values.environment);
  const apiKey = process.env[variable];
  if (!apiKey) {
    process.stderr.write(`${variable} is not set: it must hold a secret key with the environment:deploy scope\n`);
    return 2;
  }
  const host = values.host ?? process.env['LATCHKEY_HOST'] ?? 'http://localhost:3003';
  try {
    await deployDirectory({ dir, host, apiKey, log: (line) => process.stdout.write(`${line}\n`) });
    return 0;
  } catch (error) {
    if (!(error instanceof DeployError)) throw error;
    process.stderr.write(`${error.message}\n`);
    for (const item of error.diagnostics) {
      process.stderr.write(`  ${item.severity}: ${item.message}${item.line === undefined ? '' : ` (line ${item.line}:${item.column ?? 0})`}\n`);
    }
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
