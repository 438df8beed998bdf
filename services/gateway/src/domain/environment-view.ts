import type { EnvironmentDoc } from '../db/environment-model.js';

/** The operator's view of an environment: settings, never signing keys or API keys. */
export function environmentView(environment: EnvironmentDoc) {
  return {
    id: environment._id,
    public_id: environment.public_id,
    name: environment.name,
    account_id: environment.account_id,
    webhook_url: environment.webhook_url,
    webhook_url_secondary: environment.webhook_url_secondary,
    send_auth_webhooks: environment.send_auth_webhooks,
    callback_url: environment.callback_url,
    connect_return_origins: environment.connect_return_origins ?? [],
    variables: environment.variables.map(({ name, value }) => ({ name, value })),
    created_at: environment.created_at.toISOString(),
    updated_at: environment.updated_at.toISOString(),
  };
}
