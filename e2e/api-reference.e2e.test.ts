import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { repoRoot } from '@latchkey/testing';
import { artifactPath, launchBrowser } from './support/browser.js';
import { http, startStack, type Stack } from './support/stack.js';

/**
 * The API reference a running gateway serves: the document without a key, every operation in it
 * routed, and the page rendered in Chromium from the gateway alone, under a strict CSP.
 */
let stack: Stack;
let browser: Browser;

const committed = JSON.parse(readFileSync(join(repoRoot(), 'docs', 'openapi.json'), 'utf8')) as {
  paths: Record<string, Record<string, { summary: string }>>;
};
const operations = Object.entries(committed.paths).flatMap(([path, item]) => Object.keys(item).map((method) => ({ method, path })));

beforeAll(async () => {
  [stack, browser] = await Promise.all([startStack(), launchBrowser()]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.dispose();
});

describe('the API reference', () => {
  it('is served at GET /openapi.json without a key, as docs/openapi.json holds it', async () => {
    const answer = await http(`${stack.url}/openapi.json`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(answer.json).toEqual(committed);
  });

  it('names only routes the gateway serves', async () => {
    // Without credentials nothing runs: each answer is a refusal, a page, or a 404 of the route's own.
    for (const { method, path } of operations) {
      const answer = await fetch(`${stack.url}${path.replace(/\{[^}]+\}/g, 'x')}`, { method: method.toUpperCase() });
      const body = (await answer.text()).trim();
      const code = answer.status === 404 && body.startsWith('{') ? (JSON.parse(body) as { error?: { code?: string } }).error?.code : undefined;
      expect([method, path, code]).toEqual([method, path, code === 'route_not_found' ? 'served' : code]);
    }
  }, 30_000);

  it('renders at GET /docs in Chromium with no request leaving this machine and no inline script', async () => {
    const page = await browser.newPage();
    const requested: string[] = [];
    const refusedByCsp: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    page.on('console', (message) => {
      if (message.text().includes('Content Security Policy')) refusedByCsp.push(message.text());
    });
    const answer = await page.goto(`${stack.url}/docs`);
    expect(answer?.status()).toBe(200);
    const csp = answer?.headers()['content-security-policy'] ?? '';
    const scriptSrc = csp.split(';').find((directive) => directive.trim().startsWith('script-src')) ?? '';
    expect(scriptSrc).toMatch(/^\s*script-src 'self' 'nonce-[A-Za-z0-9+/=]+'$/);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");

    await page.locator('.opblock').first().waitFor({ timeout: 30_000 });
    expect(await page.locator('.opblock').count()).toBe(operations.length);
    await expect(page.locator('.opblock-summary-path', { hasText: '/connections/{connectionId}' }).count()).resolves.toBeGreaterThan(0);
    await page.screenshot({ path: artifactPath('api-reference'), fullPage: false });

    const origin = new URL(stack.url).origin;
    expect(requested.length).toBeGreaterThan(3);
    expect(requested.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith('data:'))).toEqual([]);
    expect(refusedByCsp).toEqual([]);
    await page.close();
  }, 60_000);
});
