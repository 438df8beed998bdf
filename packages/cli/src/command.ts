import { parseArgs } from 'node:util';
import { DeployError, deployDirectory } from './deploy.js';
import { InitError, initProject } from './init.js';

const USAGE = `usage: latchkey init <dir>
       latchkey deploy [dir] --environment <name> [--host <url>]

init writes a new functions project into <dir>: a package.json depending on @latchkey/functions,
one example action and one example sync under <dir>/functions/example/.

deploy bundles every function under <dir>/<integration>/ (default: ./functions) and deploys each
integration's set. The secret key comes from SERVICE_SECRET_KEY_<ENVIRONMENT> (upper case,
non-alphanumerics as _); the host from --host, else LATCHKEY_HOST, else http://localhost:3003.`;

/** `SERVICE_SECRET_KEY_<ENV>`: the spec's variable for command-line tools. */
export function keyVariable(environment: string): string {
  return `SERVICE_SECRET_KEY_${environment.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

function init(dir: string | undefined): number {
  if (!dir) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  try {
    for (const file of initProject(dir)) process.stdout.write(`created ${file}\n`);
  } catch (error) {
    if (!(error instanceof InitError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 1;
  }
  process.stdout.write(`\nnext: cd ${dir} && npm install, then SERVICE_SECRET_KEY_DEV=<secret key> npm run deploy\n`);
  return 0;
}

async function deploy(dir: string, environment: string | undefined, hostOption: string | undefined): Promise<number> {
  if (!environment) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const variable = keyVariable(environment);
  const apiKey = process.env[variable];
  if (!apiKey) {
    process.stderr.write(`${variable} is not set: it must hold a secret key with the environment:deploy scope and those deployed functions use (or full access)\n`);
    return 2;
  }
  const host = hostOption ?? process.env['LATCHKEY_HOST'] ?? 'http://localhost:3003';
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

/** Runs the command `argv` (the arguments after `latchkey`) names; resolves with its exit code. */
export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { environment: { type: 'string', short: 'e' }, host: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (error) {
    // A mistyped or incomplete option is the user's mistake, answered as any other: say which, then how.
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_')) throw error;
    const reason = String((error as Error).message).split('. ')[0]!;
    process.stderr.write(`latchkey: ${reason.charAt(0).toLowerCase()}${reason.slice(1)}\n\n${USAGE}\n`);
    return 2;
  }
  const { positionals, values } = parsed;
  const [command, dir, ...extra] = positionals;
  if (values.help) {
    process.stderr.write(`${USAGE}\n`);
    return 0;
  }
  if (command === 'init' && extra.length === 0) return init(dir);
  if (command === 'deploy' && extra.length === 0) return deploy(dir ?? 'functions', values.environment, values.host);
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

