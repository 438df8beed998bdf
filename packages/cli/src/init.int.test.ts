import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from '@jest/globals';
import { initProject } from './init.js';

const work = mkdtempSync(join(tmpdir(), 'latchkey-init-'));
const packages = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

afterAll(() => rmSync(work, { recursive: true, force: true }));

it('has a project made from a checkout take the SDK and the CLI from that checkout, not a registry name anyone could publish', () => {
  const dir = join(work, 'app');
  expect(initProject(dir)).toContain('package.json');
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
  expect(manifest.dependencies).toEqual({ '@latchkey/functions': `file:${join(packages, 'functions')}` });
  expect(manifest.devDependencies).toEqual({ '@latchkey/cli': `file:${join(packages, 'cli')}` });
});
