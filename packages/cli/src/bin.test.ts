import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

describe('the latchkey command', () => {
  it('is a committed file, so npm ci links it in a fresh clone before anything is built', () => {
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    const target = manifest.bin['latchkey']!;
    expect(target.startsWith('dist/')).toBe(false);
    const file = join(root, target);
    expect(readFileSync(file, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
    expect(statSync(file).mode & 0o111).not.toBe(0);
    const tracked = execFileSync('git', ['ls-files', '--error-unmatch', target], { cwd: root, encoding: 'utf8' });
    expect(tracked.trim()).toBe(target);
  });
});
