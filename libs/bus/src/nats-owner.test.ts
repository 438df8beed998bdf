import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';

/**
 * The bus owns NATS: services, and the libraries above the bus, reach it through `Bus` and never
 * hold the client themselves, so the client's line can change here alone. Only the bus and the
 * test servers (libs/testing, e2e) name the client package.
 */
const root = fileURLToPath(new URL('../../..', import.meta.url));
const CLIENT = /from '(nats|@nats-io\/[a-z-]+)'|import\('(nats|@nats-io\/[a-z-]+)'\)/;
const ALLOWED = new Set(['libs/bus', 'libs/testing']);

function workspaces(): string[] {
  return ['libs', 'packages', 'services']
    .filter((group) => existsSync(join(root, group)))
    .flatMap((group) => readdirSync(join(root, group)).map((name) => `${group}/${name}`))
    .filter((dir) => !ALLOWED.has(dir));
}

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sources(path);
    return /\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

describe('the bus owns NATS', () => {
  it('no service or other library imports the NATS client', () => {
    const offenders = workspaces().flatMap((dir) => {
      let files: string[];
      try {
        files = sources(`${dir}/src`);
      } catch {
        return [];
      }
      return files.filter((file) => CLIENT.test(readFileSync(join(root, file), 'utf8')));
    });
    expect(offenders).toEqual([]);
  });

  it('no service or other library depends on the NATS client package', () => {
    const offenders = workspaces().flatMap((dir) => {
      let manifest: { dependencies?: Record<string, string>; devDependencies?: Record<string, string> };
      try {
        manifest = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as typeof manifest;
      } catch {
        return [];
      }
      const names = [...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.devDependencies ?? {})];
      return names.filter((name) => name === 'nats' || name.startsWith('@nats-io/')).map((name) => `${dir}: ${name}`);
    });
    expect(offenders).toEqual([]);
  });
});
