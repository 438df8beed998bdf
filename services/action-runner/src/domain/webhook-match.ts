/** Where providers commonly name a webhook's type, in order of preference. */
const TYPE_FIELDS = ['type', 'event', 'event_type', 'eventType', 'topic', 'action'];

/** The webhook's type as the provider's body names it, if it does (a dot path is not followed). */
export function webhookType(payload: unknown): string | undefined {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return undefined;
  for (const field of TYPE_FIELDS) {
    const value = (payload as Record<string, unknown>)[field];
    if (typeof value === 'string' && value !== '') return value;
  }
  return undefined;
}

/**
 * Whether a sync subscribed to this webhook: `*` takes every webhook, a name ending in `.*`
 * every type under that prefix (`issue.*`), anything else that exact type.
 */
export function subscribes(subscriptions: readonly string[], type: string | undefined): boolean {
  return subscriptions.some((subscription) => {
    if (subscription === '*') return true;
    if (type === undefined) return false;
    if (subscription.endsWith('.*')) return type.startsWith(subscription.slice(0, -1));
    return subscription === type;
  });
}
