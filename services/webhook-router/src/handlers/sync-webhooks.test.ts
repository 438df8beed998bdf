import { describe, expect, it } from '@jest/globals';
import { webhookContracts, type PayloadOf, type syncContracts } from '@latchkey/contracts';
import { environmentInfo, keepingDeliveries } from '../delivery-fixture.js';
import { syncRunCompletedHandler } from './sync-webhooks.js';

const environment = environmentInfo();

/** The deliveries the handler makes, kept instead of enqueued. */
function making() {
  const { made, deps } = keepingDeliveries(environment);
  return { made, deps: deps as unknown as Parameters<typeof syncRunCompletedHandler>[0] };
}

const completed = (runId: string, models: string[]): PayloadOf<typeof syncContracts.runCompleted> => ({
  environment_id: 'env_a',
  run_id: runId,
  provider_config_key: 'acme',
  connection_id: 'conn-1',
  sync_name: 'contacts',
  variant: 'base',
  results: Object.fromEntries(models.map((model) => [model, { added: 1, updated: 0, deleted: 0 }])),
  started_at: '2026-01-01T00:00:00.000Z',
  finished_at: '2026-01-01T00:00:05.000Z',
});

describe('the webhook-id of a sync webhook', () => {
  it('names the run and the model when they fit in a webhook-id', async () => {
    const { made, deps } = making();
    await syncRunCompletedHandler(deps)(completed('run-1', ['Contact']));
    expect(made.map((delivery) => delivery.webhook_id)).toEqual(['msg_sync_run-1_Contact']);
  });

  it("of an onWebhook run of a sync with a 100-character name, for 64-character models, fits the delivery contract and is the same when the run's event comes again", async () => {
    // What the action-runner names the run of a sync that a provider webhook started.
    const runId = `webhook-iwh_${'a'.repeat(32)}-${'s'.repeat(100)}`;
    const models = [`M${'m'.repeat(63)}`, `N${'n'.repeat(63)}`];
    const { made, deps } = making();
    const handle = syncRunCompletedHandler(deps);
    await handle(completed(runId, models));
    await handle(completed(runId, models));

    expect(made).toHaveLength(4);
    for (const delivery of made) expect(webhookContracts.deliver.payload.safeParse(delivery).success).toBe(true);
    const ids = made.map((delivery) => delivery.webhook_id);
    // Redelivered, the event makes the same ids (JetStream and receivers drop the copies)…
    expect(ids.slice(2)).toEqual(ids.slice(0, 2));
    // …and each model keeps a webhook-id of its own.
    expect(ids[0]).not.toBe(ids[1]);
    expect(ids[0]).toMatch(/^msg_sync_/);
  });
});
