import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { repoRoot } from '@latchkey/testing';

/** Debian's Chromium, headless (a fresh profile each launch), with nothing that would reach outside this machine. */
export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Where screenshots of each step go (ignored by git). */
export function artifactPath(name: string): string {
  const dir = join(repoRoot(), 'e2e', 'artifacts');
  mkdirSync(dir, { recursive: true });
  return join(dir, `${name}.png`);
}
