/**
 * The hosted Connect UI: an end user picks one of the integrations their session allows and
 * authorizes it (OAuth 2 at the provider, or a form for keys and passwords). Opened as a link it
 * returns to `return_url` when done; opened as a popup it reports to its opener with
 * `{type:'connect', connectionId, providerConfigKey}`, `{type:'error', error}` or `{type:'close'}`.
 * Both only toward origins the environment registered (`return_origins`) or this page's own: a
 * `return_url` elsewhere is ignored, and messages are posted to those origins by name, never '*'.
 */

interface SessionIntegration {
  unique_key: string;
  display_name: string;
  logo: string;
  auth_mode: string;
  connection_configuration: string[];
  docs_connect?: string;
  /** The session lets the end user bring their own OAuth client. */
  own_oauth_client?: boolean;
}

interface Field {
  name: string;
  label: string;
  secret?: boolean;
  optional?: boolean;
}

interface SessionView {
  integrations: SessionIntegration[];
  /** Set when the session renews the credentials of one existing connection. */
  reconnect: { connection_id: string; integration_id: string } | null;
  expires_at: string;
  /** Origins the environment registered for returns and messages. */
  return_origins?: string[];
  /** What the customer set for each integration: those fields are theirs, not asked of the end user. */
  integrations_config_defaults?: Record<string, { connection_config: Record<string, unknown> }>;
}

/**
 * How the form is reached: from a list (a way back), whether it renews a connection, and the
 * connection config the customer set for the session (the flow takes it from the session).
 */
interface PickContext {
  fromList: boolean;
  reconnect: boolean;
  preset: Record<string, { connection_config: Record<string, unknown> }>;
}

const query = new URLSearchParams(location.search);
const token = query.get('session_token') ?? '';
const requestedReturnUrl = query.get('return_url');
/** Where the page may send the end user back and post its outcome; known once the session is read. */
let trustedOrigins: string[] = [location.origin];
let returnUrl: string | null = null;

/**
 * The return URL if it is an absolute http(s) URL on a trusted origin, else null. Parsed without
 * a base, so scheme-relative (`//host`), backslash (`/\host`) and `javascript:` forms all fail.
 */
function trustedReturnUrl(raw: string | null, origins: readonly string[]): string | null {
  if (!raw) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.username !== '' || url.password !== '') return null;
  return origins.includes(url.origin) ? url.href : null;
}
const root = document.getElementById('app') as HTMLElement;

/** Credential fields each form-based auth mode asks for. */
const FORM_FIELDS: Record<string, Field[]> = {
  API_KEY: [{ name: 'apiKey', label: 'API key', secret: true }],
  BASIC: [
    { name: 'username', label: 'Username' },
    { name: 'password', label: 'Password', secret: true },
  ],
  OAUTH2_CC: [
    { name: 'client_id', label: 'Client ID' },
    { name: 'client_secret', label: 'Client secret', secret: true },
  ],
};

/** Auth modes that send the end user to the provider. */
const REDIRECT_MODES = new Set(['OAUTH2', 'OAUTH1']);

/** The optional fields for an end user's own OAuth client (a session's `oauth_client_*_override`). */
const OWN_CLIENT_FIELDS: Field[] = [
  { name: 'own:oauth_client_id_override', label: 'Your OAuth client ID', optional: true },
  { name: 'own:oauth_client_secret_override', label: 'Your OAuth client secret', secret: true, optional: true },
];

function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Partial<HTMLElementTagNameMap[K]> = {}, ...children: Array<Node | string>): HTMLElementTagNameMap[K] {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

function report(message: Record<string, unknown>): void {
  if (!window.opener) return;
  // Delivered only if the opener's origin is the one named: never to an unregistered page.
  for (const origin of trustedOrigins) window.opener.postMessage(message, origin);
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
  const destination = returnUrl;
  if (destination) setTimeout(() => location.assign(destination), 800);
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
  if (body?.error?.code === 'connection_test_failed') return `${body.error.message}. Please check what you entered and try again.`;
  const fields = (body?.error?.errors ?? []) as Array<{ path: string; message: string }>;
  if (fields.length > 0) return `Please check: ${fields.map((item) => item.path.replace(/^credentials\./, '')).join(', ')}.`;
  return body?.error?.message ?? 'The connection could not be saved. Please try again.';
}

function pick(integration: SessionIntegration, context: PickContext): void {
  const redirects = REDIRECT_MODES.has(integration.auth_mode);
  const ownClient = redirects && integration.own_oauth_client === true ? OWN_CLIENT_FIELDS : [];
  // A reconnect keeps the connection's config: nothing of it is asked again.
  const preset = context.preset[integration.unique_key]?.connection_config ?? {};
  const asked = context.reconnect ? [] : integration.connection_configuration.filter((name) => preset[name] === undefined || preset[name] === '');
  const fields: Field[] = [
    ...(FORM_FIELDS[integration.auth_mode] ?? []),
    ...asked.map((name) => ({ name: `config:${name}`, label: name.replace(/_/g, ' ') })),
    ...ownClient,
  ];
  const error = el('p', { className: 'error', role: 'alert' });
  const submitLabel = redirects ? `Continue to ${integration.display_name}` : 'Connect';
  const submit = el('button', { type: 'submit', textContent: submitLabel });
  const form = el('form', { noValidate: true });
  const input = (field: Field) => {
    const id = `field-${field.name.replace(/[^a-z0-9]/gi, '-')}`;
    return [
      el('label', { htmlFor: id, textContent: field.label }),
      el('input', { id, name: field.name, type: field.secret ? 'password' : 'text', required: !field.optional, autocomplete: 'off' }),
    ];
  };
  for (const field of fields.filter((item) => !item.optional)) form.append(...input(field));
  if (ownClient.length > 0) {
    form.append(
      el(
        'fieldset',
        { className: 'optional' },
        el('legend', { textContent: 'Use your own OAuth app (optional)' }),
        el('p', { className: 'hint', textContent: `Leave empty to connect with the application's own ${integration.display_name} app.` }),
        ...ownClient.flatMap(input),
      ),
    );
  }
  const intro = context.reconnect
    ? `Authorize again to renew this application's access to your ${integration.display_name} account; the connection keeps its settings.`
    : redirects
      ? `You will be taken to ${integration.display_name} to approve access, then brought back here.`
      : '';
  if (integration.docs_connect) form.append(el('p', {}, el('a', { href: integration.docs_connect, target: '_blank', rel: 'noopener', textContent: 'Where do I find these?' })));
  form.append(error, submit);
  form.onsubmit = async (event) => {
    event.preventDefault();
    const values = Object.fromEntries(new FormData(form).entries()) as Record<string, string>;
    const empty = fields.filter((field) => !field.optional && !values[field.name]?.trim()).map((field) => field.label);
    if (empty.length > 0) {
      error.textContent = `Please fill in: ${empty.join(', ')}.`;
      return;
    }
    const withPrefix = (prefix: string) =>
      Object.fromEntries(Object.entries(values).filter(([name, value]) => name.startsWith(prefix) && value.trim()).map(([name, value]) => [name.slice(prefix.length), value.trim()]));
    const config = withPrefix('config:');
    const own = withPrefix('own:');
    if (ownClient.length > 0 && Object.keys(own).length === 1) {
      error.textContent = 'To use your own OAuth app, fill in both its client ID and its secret (or neither).';
      return;
    }
    submit.disabled = true;
    submit.textContent = redirects ? `Opening ${integration.display_name}…` : 'Connecting…';
    const session = `connect_session_token=${encodeURIComponent(token)}`;
    const key = encodeURIComponent(integration.unique_key);
    if (redirects) {
      // A POST, so that an end user's client secret never sits in a URL.
      const { status, body } = await api(`/oauth/connect/${key}?${session}`, {
        method: 'POST',
        body: JSON.stringify({ ...(Object.keys(config).length ? { connection_config: config } : {}), ...own }),
      });
      if (status === 200) return location.assign(body.url);
      submit.disabled = false;
      submit.textContent = submitLabel;
      error.textContent = explain(status, body);
      return;
    }
    const credentials = Object.fromEntries(Object.entries(values).filter(([name]) => !name.includes(':')));
    const route = integration.auth_mode === 'API_KEY' ? 'api-auth/api-key' : integration.auth_mode === 'BASIC' ? 'api-auth/basic' : `auth/${integration.auth_mode.toLowerCase()}`;
    const { status, body } = await api(`/${route}/${key}?${session}`, {
      method: 'POST',
      body: JSON.stringify({ ...credentials, ...(Object.keys(config).length ? { connection_config: config } : {}) }),
    });
    if (status === 200) return succeed(body.connectionId, body.providerConfigKey, integration.display_name);
    submit.disabled = false;
    submit.textContent = submitLabel;
    error.textContent = explain(status, body);
  };
  show(
    ...(context.fromList ? [el('button', { className: 'link', textContent: '← All integrations', onclick: () => void start() })] : []),
    el('h1', { tabIndex: -1 }, logo(integration), context.reconnect ? `Reconnect ${integration.display_name}` : integration.display_name),
    ...(intro ? [el('p', { className: 'intro', textContent: intro })] : []),
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
  trustedOrigins = [location.origin, ...(session.return_origins ?? [])];
  returnUrl = trustedReturnUrl(requestedReturnUrl, trustedOrigins);
  if (session.integrations.length === 0) return fail('No integration is available from this link.');
  const reconnect = session.reconnect !== null && session.reconnect !== undefined;
  const preset = session.integrations_config_defaults ?? {};
  if (session.integrations.length === 1) return pick(session.integrations[0] as SessionIntegration, { fromList: false, reconnect, preset });
  const list = el('ul', { className: 'integrations' });
  for (const integration of session.integrations) {
    list.append(el('li', {}, el('button', { className: 'integration', onclick: () => pick(integration, { fromList: true, reconnect, preset }) }, logo(integration), integration.display_name)));
  }
  show(el('h1', { tabIndex: -1, textContent: 'Connect an account' }), el('p', { textContent: 'Choose the service to connect.' }), list, closeButton());
}

void start();
