import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { startOAuthServer, type TestOAuthServer } from '@latchkey/testing';
import { artifactPath, launchBrowser } from './support/browser.js';
import { http, startStack, type Stack } from './support/stack.js';

let stack: Stack;
let oauth: TestOAuthServer;
let browser: Browser;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

beforeAll(async () => {
  oauth = await startOAuthServer();
  const providersFile = join(mkdtempSync(join(tmpdir(), 'latchkey-ui-')), 'providers.yaml');
  writeFileSync(
    providersFile,
    `loopback-oauth:\n  display_name: Loopback OAuth\n  categories: [test]\n  auth_mode: OAUTH2\n  authorization_url: ${oauth.authorizationUrl}\n  token_url: ${oauth.tokenUrl}\n`,
  );
  [stack, browser] = await Promise.all([startStack({ env: { PROVIDERS_FILE: providersFile } }), launchBrowser()]);
  const apiKeyProvider = (await api('GET', '/providers')).json.data.find((entry: { auth_mode: string; connection_configuration: string[] }) => entry.auth_mode === 'API_KEY' && entry.connection_configuration.length === 0);
  await api('POST', '/integrations', { provider: apiKeyProvider.name, unique_key: 'keys', display_name: 'Acme API' });
  await api('POST', '/integrations', { provider: 'loopback-oauth', unique_key: 'oauth', display_name: 'Loopback OAuth', credentials: { client_id: 'test-client', client_secret: 'test-secret' } });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await stack?.dispose();
  await oauth?.close();
});

describe('the hosted Connect UI', () => {
  it('lets an end user connect an API-key integration, refusing an empty key first', async () => {
    const { connect_link: link } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'ui-user' }, allowed_integrations: ['keys', 'oauth'] })).json.data;
    const page = await browser.newPage();
    await page.goto(link);
    await page.getByRole('heading', { name: 'Connect an account' }).waitFor();
    await page.screenshot({ path: artifactPath('1-choose') });
    await page.getByRole('button', { name: 'Acme API' }).click();
    await page.getByRole('button', { name: 'Connect' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('Please fill in: API key');
    await page.screenshot({ path: artifactPath('2-empty-key') });
    await page.getByLabel('API key').fill('ui-entered-key');
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.getByRole('heading', { name: 'Acme API is connected' }).waitFor();
    await page.screenshot({ path: artifactPath('3-connected') });
    const connection = (await api('GET', '/connections?tags[end_user_id]=ui-user')).json.connections[0];
    const full = await api('GET', `/connections/${connection.connection_id}?provider_config_key=keys`);
    expect(full.json.credentials).toEqual({ type: 'API_KEY', apiKey: 'ui-entered-key' });
    await page.close();
  });

  it('sends the end user through the provider for OAuth 2 and back to a success page', async () => {
    const { connect_link: link } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'ui-oauth' }, allowed_integrations: ['oauth'] })).json.data;
    const page = await browser.newPage();
    await page.goto(link);
    await page.getByRole('button', { name: 'Continue to Loopback OAuth' }).click();
    await page.getByRole('heading', { name: 'Connected' }).waitFor();
    await page.screenshot({ path: artifactPath('4-oauth-connected') });
    expect((await api('GET', '/connections?tags[end_user_id]=ui-oauth')).json.connections).toHaveLength(1);
    await page.close();
  });

  it('tells the end user when the link has expired', async () => {
    const page = await browser.newPage();
    await page.goto(`${stack.url}/connect?session_token=lk_cs_expired`);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('This link has expired');
    await page.screenshot({ path: artifactPath('5-expired') });
    await page.close();
  });
});
