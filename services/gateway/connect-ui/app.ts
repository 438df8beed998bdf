/**
 * The hosted Connect UI: an end user picks one of the integrations their session allows and
 * authorizes it (OAuth 2 at the provider, or a form for keys and passwords). Opened as a link it
 * returns to `return_url` when done; opened as a popup it reports to its opener with
 * `{type:'connect', connectionId, providerConfigKey}`, `{type:'error', error}` or `{type:'close'}`.
 */

interface SessionIntegration {
  unique_key: string;
  display_name: string;
  logo: string;
  auth_mode: string;
  connection_configuration: string[];
  docs_connect?: string;
}

interface SessionView {
  integrations: SessionIntegration[];
  expires_at: string;
}

const query = new URLSearchParams(location.search);
const token = query.get('session_token') ?? '';
const returnUrl = query.get('return_url');
const root = document.getElementById('app') as HTMLElement;

/** Credential fields each form-based auth mode asks for. */
const FORM_FIELDS: Record<string, Array<{ name: string; label: string; secret?: boolean }>> = {
  API_KEY: [{ name: 'apiKey', label: 'API key', secret: true }],
  BASIC: [
    { name: 'username', label: 'Username' },
    { name: 'password', label: 'Password', secret: true },
  ],
};

function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Partial<HTMLElementTagNameMap[K]> = {}, ...children: Array<Node | string>): HTMLElementTagNameMap[K] {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

function report(message: Record<string, unknown>): void {
  if (window.opener) window.opener.postMessage(message, '*');
}

function show(...children: Node[]): void {
  root.replaceChildren(...children);
  const heading = root.querySelector('h1');
  heading?.focus();
}

function closeButton(): HTMLButtonElement {
  return el('button', {
    className: 'secondary',
    textContent: 'Close',
    onclick: () => {
      report({ type: 'close' });
      window.close();
    },
  });
}

function fail(message: string): void {
  report({ type: 'error', error: message });
  show(el('h1', { className: 'fail', tabIndex: -1, textContent: 'Something went wrong' }), el('p', { role: 'alert', textContent: message }), closeButton());
}

function succeed(connectionId: string, providerConfigKey: string, name: string): void {
  report({ type: 'connect', connectionId, providerConfigKey });
  show(el('h1', { className: 'ok', tabIndex: -1, textContent: `${name} is connected` }), el('p', { textContent: 'You can close this window and return to the application.' }));
  if (returnUrl) setTimeout(() => location.assign(returnUrl), 800);
  else if (window.opener) setTimeout(() => window.close(), 800);
}

async function api(path: string, init: RequestInit = {}): Promise<{ status: number; body: any }> {
  const response = await fetch(path, { ...init, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...init.headers } });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

function explain(status: number, body: any): string {
  if (status === 401) return 'This link has expired. Ask the application for a new one.';
  if (status === 403) return 'This integration is not available from this link.';
  const fields = (body?.error?.errors ?? []) as Array<{ path: string; message: string }>;
  if (fields.length > 0) return `Please check: ${fields.map((item) => item.path.replace(/^credentials\./, '')).join(', ')}.`;
  return body?.error?.message ?? 'The connection could not be saved. Please try again.';
}

function pick(integration: SessionIntegration): void {
  const fields = [
    ...(FORM_FIELDS[integration.auth_mode] ?? []),
    ...integration.connection_configuration.map((name) => ({ name: `config:${name}`, label: name.replace(/_/g, ' '), secret: false })),
  ];
  const error = el('p', { className: 'error', role: 'alert' });
  const submit = el('button', { type: 'submit', textContent: integration.auth_mode === 'OAUTH2' ? `Continue to ${integration.display_name}` : 'Connect' });
  const form = el('form', { noValidate: true });
  for (const field of fields) {
    const id = `field-${field.name.replace(/[^a-z0-9]/gi, '-')}`;
    form.append(
      el('label', { htmlFor: id, textContent: field.label }),
      el('input', { id, name: field.name, type: field.secret ? 'password' : 'text', required: true, autocomplete: 'off' }),
    );
  }
  if (integration.docs_connect) form.append(el('p', {}, el('a', { href: integration.docs_connect, target: '_blank', rel: 'noopener', textContent: 'Where do I find these?' })));
  form.append(error, submit);
  form.onsubmit = async (event) => {
    event.preventDefault();
    const values = Object.fromEntries(new FormData(form).entries()) as Record<string, string>;
    const empty = fields.filter((field) => !values[field.name]?.trim()).map((field) => field.label);
    if (empty.length > 0) {
      error.textContent = `Please fill in: ${empty.join(', ')}.`;
      return;
    }
    const config = Object.fromEntries(Object.entries(values).filter(([name]) => name.startsWith('config:')).map(([name, value]) => [name.slice(7), value]));
    if (integration.auth_mode === 'OAUTH2') {
      const params = new URLSearchParams({ connect_session_token: token });
      for (const [name, value] of Object.entries(config)) params.set(`params[${name}]`, value);
      location.assign(`/oauth/connect/${encodeURIComponent(integration.unique_key)}?${params}`);
      return;
    }
    submit.disabled = true;
    submit.textContent = 'Connecting…';
    const credentials = Object.fromEntries(Object.entries(values).filter(([name]) => !name.startsWith('config:')));
    const route = integration.auth_mode === 'API_KEY' ? 'api-auth/api-key' : integration.auth_mode === 'BASIC' ? 'api-auth/basic' : `auth/${integration.auth_mode.toLowerCase()}`;
    const { status, body } = await api(`/${route}/${encodeURIComponent(integration.unique_key)}?connect_session_token=${encodeURIComponent(token)}`, {
      method: 'POST',
      body: JSON.stringify({ ...credentials, ...(Object.keys(config).length ? { connection_config: config } : {}) }),
    });
    if (status === 200) return succeed(body.connectionId, body.providerConfigKey, integration.display_name);
    submit.disabled = false;
    submit.textContent = 'Connect';
    error.textContent = explain(status, body);
  };
  show(
    el('button', { className: 'link', textContent: '← All integrations', onclick: () => void start() }),
    el('h1', { tabIndex: -1 }, logo(integration), integration.display_name),
    form,
  );
}

function logo(integration: SessionIntegration): HTMLElement {
  if (!integration.logo) return el('span', { className: 'logo placeholder', textContent: integration.display_name.slice(0, 1) });
  const image = el('img', { className: 'logo', src: integration.logo, alt: '' });
  image.onerror = () => image.replaceWith(el('span', { className: 'logo placeholder', textContent: integration.display_name.slice(0, 1) }));
  return image;
}

async function start(): Promise<void> {
  if (!token) return fail('This link is incomplete. Ask the application for a new one.');
  const { status, body } = await api('/connect/session');
  if (status !== 200) return fail(explain(status, body));
  const session = body.data as SessionView;
  if (session.integrations.length === 0) return fail('No integration is available from this link.');
  if (session.integrations.length === 1) return pick(session.integrations[0] as SessionIntegration);
  const list = el('ul', { className: 'integrations' });
  for (const integration of session.integrations) {
    list.append(el('li', {}, el('button', { className: 'integration', onclick: () => pick(integration) }, logo(integration), integration.display_name)));
  }
  show(el('h1', { tabIndex: -1, textContent: 'Connect an account' }), el('p', { textContent: 'Choose the service to connect.' }), list, closeButton());
}

void start();
