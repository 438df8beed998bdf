/** The spec's forwarded body: `connectionId` is left out when the webhook matched no connection. */
export function forwardBody(input: { integration: string; connectionId: string | null; payload: unknown }): string {
  return JSON.stringify({
    from: input.integration,
    providerConfigKey: input.integration,
    type: 'forward',
    ...(input.connectionId !== null && { connectionId: input.connectionId }),
    payload: input.payload,
  });
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

/** The provider's body as the customer gets it: JSON parsed, anything else as text. */
export function providerPayload(body: Buffer): { payload: unknown; json: boolean } {
  const text = body.toString('utf8');
  try {
    return { payload: JSON.parse(text), json: true };
  } catch {
    return { payload: text, json: false };
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
