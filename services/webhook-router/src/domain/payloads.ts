/**
 * The body of a forwarded webhook: `from` is the provider that sent it (its catalog name,
 * `hubspot`), `providerConfigKey` the integration it came in on. The provider's body is written
 * in as it came (JSON is spliced in as its own text, which parsed as one JSON value), not parsed
 * and written again: numbers past 2^53, decimals as written and the provider's own signature over
 * its body survive. A body that is not JSON goes as a string.
 */
export function forwardBody(input: { provider: string; integration: string; connectionId: string | null; payload: ProviderPayload }): string {
  const head = JSON.stringify({
    from: input.provider,
    providerConfigKey: input.integration,
    type: 'forward',
    ...(input.connectionId !== null && { connectionId: input.connectionId }),
  });
  const { json, text } = input.payload;
  return `${head.slice(0, -1)},"payload":${json ? text : JSON.stringify(text)}}`;
}

export interface AuthWebhook {
  operation: 'creation' | 'override' | 'refresh';
  success: boolean;
  connectionId: string;
  providerConfigKey: string;
  provider: string;
  environment: string;
  tags: Record<string, string>;
  error?: { type: string; description: string };
}

/** An auth webhook: a connection was created or overridden by a connect flow, or failed to refresh. */
export function authBody(webhook: AuthWebhook): string {
  return JSON.stringify({ type: 'auth', ...webhook });
}

/** An async action finished: where to read its result, and whether it succeeded. */
export interface AsyncActionWebhook {
  connectionId: string;
  providerConfigKey: string;
  actionName: string;
  id: string;
  statusUrl: string;
  success: boolean;
  error?: { code: string; message: string };
  completedAt: string;
}

export function asyncActionBody(webhook: AsyncActionWebhook): string {
  return JSON.stringify({ type: 'async_action', ...webhook });
}

/** A provider's body: its text, and its value when the text is JSON. */
export interface ProviderPayload {
  /** The JSON value, or the text itself when it is not JSON. */
  payload: unknown;
  json: boolean;
  /** The body as UTF-8 text, as it came. */
  text: string;
}

/** The provider's body as functions and the customer get it: JSON parsed, anything else as text. */
export function providerPayload(body: Buffer): ProviderPayload {
  const text = body.toString('utf8');
  try {
    return { payload: JSON.parse(text), json: true, text };
  } catch {
    return { payload: text, json: false, text };
  }
}

export interface SyncWebhook {
  connectionId: string;
  providerConfigKey: string;
  syncName: string;
  model: string;
  syncVariant: string;
  responseResults: { added: number; updated: number; deleted: number };
  /** Records of this run are those modified after this instant (the run's start): read them with `modified_after`. */
  modifiedAfter: string;
  queryTimeStamp: string;
}

/** A sync webhook: one model of one run changed records. */
export function syncBody(webhook: SyncWebhook): string {
  return JSON.stringify({ type: 'sync', ...webhook });
}
