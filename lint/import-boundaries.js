// The import boundaries of the tree (HOUSE-STYLE.md, principles 12, 23 and 24), as ESLint flat
// config for the tree at `root`:
// - a service imports libraries only: no other service, no published package;
// - a library never imports a service;
// - a published package imports nothing internal (its tests may: they are not published);
// - nothing reaches into another workspace by a relative path, and no module imports itself;
// - no import cycle inside a workspace (between workspaces, `tsc -b` refuses circular references).
// The rules read import specifiers (`@latchkey/<name>`), so they hold before anything is built.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

/** The package names of the workspaces in one folder of the tree (`libs`, `packages`, `services`). */
function workspaceNames(root, folder) {
  const dir = join(root, folder);
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(dir, entry.name, 'package.json')))
    .map((entry) => JSON.parse(readFileSync(join(dir, entry.name, 'package.json'), 'utf8')).name)
    .sort();
}

/** `no-restricted-imports` refusing `names` (and any path inside them), saying why. */
function refuse(names, message) {
  return ['error', { patterns: names.map((name) => ({ group: [name, `${name}/**`], message })) }];
}

export function importBoundaries(root) {
  const libs = workspaceNames(root, 'libs');
  const packages = workspaceNames(root, 'packages');
  const services = workspaceNames(root, 'services');
  return [
    { ignores: ['**/dist/**', '**/node_modules/**', '.data/**'] },
    {
      files: ['**/*.ts'],
      // The tree keeps two disable comments for a typescript-eslint rule that is off here.
      linterOptions: { reportUnusedDisableDirectives: 'off' },
      languageOptions: { parser: tseslint.parser, ecmaVersion: 'latest', sourceType: 'module' },
      // typescript-eslint is registered for the disable comments that name its rules; none is on.
      plugins: { 'import-x': importX, '@typescript-eslint': tseslint.plugin },
      settings: {
        // The files whose imports are followed (for cycles), and how to read them.
        'import-x/extensions': ['.ts', '.js'],
        'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
        // NodeNext source imports `./x.js` for `./x.ts`.
        'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.json'], extensionAlias: { '.js': ['.ts', '.js'] } })],
      },
      rules: {
        'import-x/no-cycle': ['error', { ignoreExternal: true }],
        'import-x/no-relative-packages': 'error',
        'import-x/no-self-import': 'error',
      },
    },
    {
      // TODO(issue 18, the libs/bus rework): create-bus.ts and pull-stream.ts import each other
      // (pullAllFrom ↔ connectionOf); remove this exception when that cycle is gone.
      files: ['libs/bus/src/create-bus.ts', 'libs/bus/src/pull-stream.ts'],
      rules: { 'import-x/no-cycle': 'off' },
    },
    {
      files: ['services/**/*.ts'],
      rules: {
        'no-restricted-imports': refuse(
          [...services, ...packages],
          'a service imports libraries only (libs/): ask another service through a contract, and leave published packages to customers',
        ),
      },
    },
    {
      files: ['libs/**/*.ts'],
      rules: { 'no-restricted-imports': refuse(services, 'a library never imports a service') },
    },
    {
      files: ['packages/**/*.ts'],
      ignores: ['**/*.test.ts'],
      rules: {
        'no-restricted-imports': refuse(
          [...libs, ...services],
          'a published package imports nothing internal: customers install it without the libs/ and services/ of this repository',
        ),
      },
    },
  ];
}
