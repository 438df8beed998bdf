import type { FunctionDescriptionWire, ScriptsConfigEntry } from '@latchkey/contracts';

interface Deployment {
  provider_config_key: string;
  version: number;
  created_at: Date;
  functions: Array<{ description: FunctionDescriptionWire }>;
}

/** The newest deployment of each integration, as the spec's scripts config entries (by key). */
export function scriptsConfig(deployments: readonly Deployment[]): ScriptsConfigEntry[] {
  const newest = new Map<string, Deployment>();
  for (const deployment of deployments) {
    const seen = newest.get(deployment.provider_config_key);
    if (!seen || seen.version < deployment.version) newest.set(deployment.provider_config_key, deployment);
  }
  return [...newest.values()]
    .sort((a, b) => a.provider_config_key.localeCompare(b.provider_config_key))
    .map((deployment) => {
      const entry: ScriptsConfigEntry = {
        providerConfigKey: deployment.provider_config_key,
        version: deployment.version,
        deployed_at: new Date(deployment.created_at).toISOString(),
        syncs: [],
        actions: [],
        onEventScripts: [],
      };
      for (const { description } of deployment.functions) {
        const about = description.type !== 'on-event' && description.description !== undefined ? { description: description.description } : {};
        if (description.type === 'sync') {
          entry.syncs.push({
            name: description.name,
            type: 'sync',
            ...about,
            frequency: description.frequency,
            models: description.models,
            webhookSubscriptions: description.webhook_subscriptions,
          });
        } else if (description.type === 'action') {
          entry.actions.push({ name: description.name, type: 'action', ...about, has_input_schema: description.has_input_schema });
        } else {
          entry.onEventScripts.push({ name: description.name, event: description.event });
        }
      }
      return entry;
    });
}
