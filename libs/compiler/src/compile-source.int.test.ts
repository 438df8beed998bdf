import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileSource } from './compile-source.js';

const SECRET = 'canary-compile-5f1c9a7e2b';
const dir = mkdtempSync(join(tmpdir(), 'latchkey-compile-'));
const secretFile = join(dir, 'secret.json');
writeFileSync(secretFile, JSON.stringify({ secret: SECRET }));
writeFileSync(join(dir, 'secret.ts'), `export const secret = '${SECRET}';\n`);

const ok = `import { defineAction } from '@latchkey/functions';\nexport default defineAction({ name: 'hi', exec: () => 'hi' });\n`;

/** What an attacker sends: each must fail, and no diagnostic may carry anything but its own lines. */
const attacks: Record<string, string> = {
  'an absolute path': `import x from '${secretFile}';\nexport default x;\n`,
  'an absolute TypeScript file': `import { secret } from '${join(dir, 'secret.ts')}';\nexport default secret;\n`,
  'a relative path': `import x from '${'../'.repeat(12)}${secretFile.slice(1)}';\nexport default x;\n`,
  'an import attribute': `import x from '@latchkey/functions' with { type: 'json' };\nexport default x;\n`,
  'a text import': `import x from '/proc/self/environ' with { type: 'text' };\nexport default x;\n`,
  'a package': `import leftPad from 'left-pad';\nexport default leftPad;\n`,
  'require of a built-in': `const fs = require('node:fs');\nexport default fs;\n`,
  'a dynamic import': `export default import('child_process');\n`,
  'a triple-slash reference': `/// <reference path="${join(dir, 'secret.ts')}" />\n${ok}`,
};

describe('compileSource', () => {
  it('compiles source that imports the SDK only', async () => {
    const result = await compileSource(ok);
    expect(result).toMatchObject({ ok: true, diagnostics: [] });
  });

  it.each(Object.entries(attacks))('refuses %s, quoting only the source', async (_attack, source) => {
    const result = await compileSource(source);
    expect(result.ok).toBe(false);
    expect(JSON.stringify(result)).not.toContain(SECRET);
    for (const diagnostic of result.diagnostics) if (diagnostic.text !== undefined) expect(source.split('\n')).toContain(diagnostic.text);
  });
});
