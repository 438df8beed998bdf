import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it, jest } from '@jest/globals';
import { main } from './command.js';
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

it("gives the project a deploy script that names an environment, as latchkey deploy requires", async () => {
  const dir = join(work, 'scripted');
  initProject(dir);
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const [command, ...args] = manifest.scripts['deploy']!.split(' ');
  expect(command).toBe('latchkey');
  expect(args).toEqual(['deploy', '--environment', 'dev']);
  // The command takes it as far as the key: without one, it names the variable to set, not the usage.
  const written: string[] = [];
  const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => written.push(String(chunk)) > 0);
  try {
    delete process.env['SERVICE_SECRET_KEY_DEV'];
    await expect(main(args)).resolves.toBe(2);
  } finally {
    spy.mockRestore();
  }
  expect(written.join('')).toContain('SERVICE_SECRET_KEY_DEV is not set');
  expect(written.join('')).not.toContain('usage:');
});
