import { vaultContracts } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

/**
 * The session behind the end user's token, as the Connect UI needs it: its settings and the
 * integrations it allows, each with its name, logo, auth mode and the connection config it asks
 * for, and the origins the page may return to and report to (`return_origins`: the environment's
 * `connect_return_origins`; the page refuses any other `return_url`).
 */
export const getConnectSession = defineRoute({
  method: 'get',
  path: '/connect/session',
  auth: 'connect_session',
  scope: null,
  doc: { summary: 'The connect session of the token, with its integrations' },
  schemas: {},
  handler: async ({ deps, session }) => {
    const { token: _token, environment_id: environmentId, ...view } = session;
    const [all, environment] = await Promise.all([
      deps.bus.request(vaultContracts.listIntegrations, { environment_id: environmentId }),
      deps.environments.findById(environmentId),
    ]);
    const allowed = all.filter((integration) => !view.allowed_integrations || view.allowed_integrations.includes(integration.unique_key));
    const providers = new Map(
      await Promise.all(
        [...new Set(allowed.map((integration) => integration.provider))].map(
          async (name) => [name, await deps.bus.request(vaultContracts.getProvider, { name })] as const,
        ),
      ),
    );
    const integrations = allowed.map((integration) => {
      const provider = providers.get(integration.provider);
      const docs = view.overrides[integration.unique_key]?.docs_connect;
      const defaults = view.integrations_config_defaults[integration.unique_key]?.connection_config ?? {};
      // The spec's signal: empty override keys make the page offer the end user's own OAuth client.
      const ownClient = defaults['oauth_client_id_override'] === '' && provider?.auth_mode === 'OAUTH2';
      return {
        unique_key: integration.unique_key,
        display_name: integration.display_name ?? provider?.display_name ?? integration.unique_key,
        logo: integration.logo,
        auth_mode: provider?.auth_mode ?? 'NONE',
        connection_configuration: provider?.connection_configuration ?? [],
        ...(docs ? { docs_connect: docs } : {}),
        ...(ownClient ? { own_oauth_client: true } : {}),
      };
    });
    // A client secret the customer set as a default is for the flow, not for the end user's eyes.
    const configDefaults = Object.fromEntries(
      Object.entries(view.integrations_config_defaults).map(([key, { connection_config: { oauth_client_secret_override: _secret, ...config } }]) => [key, { connection_config: config }]),
    );
    const returnOrigins = environment?.connect_return_origins ?? [];
    return { body: { data: { ...view, integrations_config_defaults: configDefaults, integrations, return_origins: returnOrigins } } };
  },
});
