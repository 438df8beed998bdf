import { describe, expect, it } from '@jest/globals';
import type { JobMessage } from '@latchkey/bus';
import type { PayloadOf, vaultContracts } from '@latchkey/contracts';
import { environmentInfo, keepingDeliveries } from '../delivery-fixture.js';
import { connectionCreatedHandler, refreshFailedHandler } from './auth-webhooks.js';

const environment = environmentInfo({ send_auth_webhooks: true });

/** The deliveries the handlers make, kept instead of enqueued. */
function making() {
  const { made, deps } = keepingDeliveries(environment);
  return { made, deps: deps as unknown as Parameters<typeof connectionCreatedHandler>[0] };
}

/**
 * A message of the EVENTS stream as a consumer gets it: its place in the stream, when it was
 * stored, its `Nats-Msg-Id` (the publisher's id for the fact, when it gave one) and how often it
 * was handed over.
 */
function eventMessage(seq: number, storedAt: number, msgId?: string, deliveryCount = 1): JobMessage {
  const headers = msgId === undefined ? undefined : { get: (name: string) => (name === 'Nats-Msg-Id' ? msgId : '') };
  return { seq, headers, info: { stream: 'EVENTS', streamSequence: seq, timestampNanos: storedAt * 1e6, deliveryCount } } as unknown as JobMessage;
}

const created = (connectionId: string): PayloadOf<typeof vaultContracts.connectionCreated> => ({
  environment_id: 'env_a',
  id: 1,
  connection_id: connectionId,
  provider_config_key: 'acme',
  provider: 'acme',
  operation: 'creation',
});

describe('the webhook-id of an auth webhook', () => {
  it('is the same when its event is handed over again, and differs for another event at the same place of a stream made again', async () => {
    const { made, deps } = making();
    const handle = connectionCreatedHandler(deps);
    await handle(created('conn-1'), eventMessage(7, 1_000, 'fact-1'));
    await handle(created('conn-1'), eventMessage(7, 1_000, 'fact-1', 2));
    // The EVENTS stream was deleted and made again: its sequence starts over.
    await handle(created('conn-2'), eventMessage(7, 9_000, 'fact-2'));
    await handle(created('conn-3'), eventMessage(8, 9_500));
    await handle(created('conn-4'), eventMessage(8, 19_500));
    const ids = made.map((delivery) => delivery.webhook_id);
    expect(ids[0]).toBe(ids[1]);
    expect(new Set(ids).size).toBe(4);
  });

  it("of a failed refresh is the refresh log entry's, whatever its place in the stream", async () => {
    const { made, deps } = making();
    const handle = refreshFailedHandler(deps);
    const failed = (logId: string) => ({ ...created('conn-1'), log_id: logId, error: { code: 'refresh_failed', message: 'invalid_grant' } });
    await handle(failed('log-1'), eventMessage(3, 1_000));
    await handle(failed('log-1'), eventMessage(3, 1_000, undefined, 2));
    await handle(failed('log-2'), eventMessage(3, 5_000));
    const ids = made.map((delivery) => delivery.webhook_id);
    expect(ids[0]).toBe(ids[1]);
    expect(ids[2]).not.toBe(ids[0]);
    expect(ids[0]).toContain('log-1');
  });
});
