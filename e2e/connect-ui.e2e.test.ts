import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startOAuthServer, type TestOAuthServer } from '@latchkey/testing';
import { artifactPath, launchBrowser } from './support/browser.js';
import { writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';

let stack: Stack;
let oauth: TestOAuthServer;
let browser: Browser;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

beforeAll(async () => {
  oauth = await startOAuthServer();
  const providersFile = writeProvidersFile(
    `loopback-oauth:\n  display_name: Loopback OAuth\n  categories: [test]\n  auth_mode: OAUTH2\n  authorization_url: ${oauth.authorizationUrl}\n  token_url: ${oauth.tokenUrl}\n`,
  );
  [stack, browser] = await Promise.all([startStack({ env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32' } }), launchBrowser()]);
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

  it('loads with no failed request and no console error (no favicon asked of the gateway either)', async () => {
    const { connect_link: link } = (await api('POST', '/connect/sessions', { tags: { end_user_id: 'ui-quiet' }, allowed_integrations: ['keys', 'oauth'] })).json.data;
    const page = await browser.newPage();
    const failures: string[] = [];
    page.on('response', (response) => {
      if (response.status() >= 400) failures.push(`${response.status()} ${new URL(response.url()).pathname}`);
    });
    page.on('console', (message) => {
      if (message.type() === 'error') failures.push(`console: ${message.text()}`);
    });
    await page.goto(link);
    await page.getByRole('heading', { name: 'Connect an account' }).waitFor();
    await page.getByRole('button', { name: 'Acme API' }).waitFor();
    // A browser asks for the icon after the page has loaded.
    await page.waitForLoadState('networkidle');
    expect(failures).toEqual([]);
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

  it('reports to its opener as a popup, and returns to return_url as a page', async () => {
    const { connect_link: link } = (await api('POST', '/connect/sessions', { allowed_integrations: ['keys'] })).json.data;
    const opener = await browser.newPage();
    await opener.goto(`${stack.url}/health`);
    // These callbacks run in the browser; the test project has no DOM types, hence the shape.
    type BrowserWindow = {
      messages: unknown[];
      addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void;
      open(url: string, name: string, features: string): unknown;
    };
    await opener.evaluate(() => {
      const browserWindow = globalThis as unknown as BrowserWindow;
      browserWindow.messages = [];
      browserWindow.addEventListener('message', (event) => browserWindow.messages.push(event.data));
    });
    const [popup] = await Promise.all([
      opener.waitForEvent('popup'),
      opener.evaluate((url) => void (globalThis as unknown as BrowserWindow).open(url, 'connect', 'width=480,height=640'), link),
    ]);
    await popup.getByLabel('API key').fill('popup-key');
    await popup.getByRole('button', { name: 'Connect' }).click();
    await popup.waitForEvent('close');
    const messages = await opener.evaluate(() => (globalThis as unknown as BrowserWindow).messages);
    expect(messages).toEqual([{ type: 'connect', connectionId: expect.any(String), providerConfigKey: 'keys' }]);
    await opener.close();

    const second = (await api('POST', '/connect/sessions', { allowed_integrations: ['keys'] })).json.data.connect_link;
    const page = await browser.newPage();
    await page.goto(`${second}&return_url=${encodeURIComponent(`${stack.url}/health`)}`);
    await page.getByLabel('API key').fill('page-key');
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.waitForURL(`${stack.url}/health`);
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
