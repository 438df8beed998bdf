import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** This package's manifest: the versions a new project asks for are the ones this CLI was released with. */
function ownManifest(): { version: string; dependencies: Record<string, string> } {
  return JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string; dependencies: Record<string, string> };
}

/** An npm package name made from the folder's name. */
function packageName(dir: string): string {
  const name = basename(resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[._-]+|[-]+$/g, '');
  return name || 'latchkey-functions';
}

const ACTION = `import { defineAction } from '@latchkey/functions';

/**
 * An action: POST /action/trigger runs it for one connection of the integration this folder is
 * named after, with the body's \`input\`, and answers what it returns.
 */
export default defineAction({
  name: 'hello',
  description: 'Greets the caller and names the connection it ran for',
  exec: async (ctx, input) => {
    const { name } = (input ?? {}) as { name?: string };
    return { greeting: \`Hello, \${name ?? 'world'}!\`, connection: ctx.connectionId };
  },
});
`;

const SYNC = `import { defineSync } from '@latchkey/functions';

/**
 * A sync: runs on its schedule for every connection of the integration, reads the provider's
 * API through \`ctx\` (the connection's credentials are added for you) and saves records, which
 * GET /records reads. Change the endpoint and the model to your provider's.
 */
export default defineSync({
  name: 'contacts',
  frequency: 'every day',
  models: { Contact: { id: 'string', name: 'string' } },
  exec: async (ctx) => {
    const response = await ctx.get<{ contacts: Array<{ id: string; name: string }> }>({ endpoint: '/contacts' });
    await ctx.batchSave(response.data.contacts, 'Contact');
  },
});
`;

const TSCONFIG = `${JSON.stringify(
  {
    // As the sandbox runs functions: ES2022, no Node or DOM globals.
    compilerOptions: { target: 'ES2022', module: 'ESNext', moduleResolution: 'Bundler', lib: ['ES2022'], types: [], strict: true, noEmit: true, skipLibCheck: true },
    include: ['functions'],
  },
  null,
  2,
)}\n`;

const README = `# Latchkey functions

Each folder under \`functions/\` is named after an integration's unique key and holds that
integration's functions, one per file: \`functions/example/hello.ts\` is an action,
\`functions/example/contacts.ts\` a sync. Rename \`example\` to your integration's key.

Deploy every integration's functions to an environment (the key needs the \`environment:deploy\`
scope and those deployed functions run with, as a full-access key has; the host is \`--host\`, else \`LATCHKEY_HOST\`, else http://localhost:3003):

    SERVICE_SECRET_KEY_DEV=<secret key> npm run deploy

The \`deploy\` script of \`package.json\` deploys to the \`dev\` environment: change it there, or
name another for one run (\`SERVICE_SECRET_KEY_PROD=<secret key> npm run deploy -- --environment prod\`).
`;

/**
 * Where a new project takes `@latchkey/functions` and this CLI from. Run from a Latchkey checkout
 * (the packages are not on a registry), the checkout's own folders, as `file:` dependencies: a
 * bare name would have npm fetch whatever a stranger published under it. Installed as a package
 * (no sources beside it, in a `node_modules`), the versions this CLI was released with.
 */
function dependencySources(): { sdk: string; cli: string } {
  const cliFolder = resolve(fileURLToPath(new URL('..', import.meta.url)));
  const sdkFolder = join(cliFolder, '..', 'functions');
  const fromCheckout = !cliFolder.split(sep).includes('node_modules') && existsSync(join(cliFolder, 'src', 'init.ts')) && existsSync(join(sdkFolder, 'src'));
  if (fromCheckout) return { sdk: `file:${sdkFolder}`, cli: `file:${cliFolder}` };
  const manifest = ownManifest();
  return { sdk: manifest.dependencies['@latchkey/functions'] ?? `^${manifest.version}`, cli: `^${manifest.version}` };
}

/** The files of a new project, by path inside it. */
function projectFiles(dir: string): Record<string, string> {
  const sources = dependencySources();
  const packageJson = {
    name: packageName(dir),
    version: '0.1.0',
    private: true,
    type: 'module',
    // `latchkey deploy` needs an environment: `dev`, as the README's example, for the user to change.
    scripts: { deploy: 'latchkey deploy --environment dev' },
    dependencies: { '@latchkey/functions': sources.sdk },
    devDependencies: { '@latchkey/cli': sources.cli },
  };
  return {
    'package.json': `${JSON.stringify(packageJson, null, 2)}\n`,
    'tsconfig.json': TSCONFIG,
    '.gitignore': 'node_modules/\n',
    'README.md': README,
    'functions/example/hello.ts': ACTION,
    'functions/example/contacts.ts': SYNC,
  };
}

export class InitError extends Error {
  override readonly name = 'InitError';
}

/**
 * Writes a functions project into `dir` (created if missing): a package.json that depends on
 * `@latchkey/functions`, a tsconfig.json, one example action and one example sync. A folder
 * that already has files is left alone. Returns the paths written, relative to `dir`.
 */
export function initProject(dir: string): string[] {
  const root = resolve(dir);
  if (existsSync(root) && readdirSync(root).length > 0) throw new InitError(`${dir} is not empty: latchkey init writes a new project into an empty or missing folder`);
  const files = projectFiles(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text, { flag: 'wx' });
  }
  return Object.keys(files);
}
