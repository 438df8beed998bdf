import { describe, expect, it } from '@jest/globals';
import type { WebhookDelivery } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger } from '@latchkey/logger';
import type { DeliveryAttemptDoc } from '../db/delivery-model.js';
import { parkedDeliveryId, type ParkedDeliveryDoc } from '../db/parked-delivery-model.js';
import { startReturningParked } from './return-parked-deliveries.js';

const logger = createLogger({ service: 'test', silent: true });

/** Waits until `done` holds, polling, for 3 s at most. */
async function until(done: () => boolean, what: string): Promise<void> {
  for (const deadline = Date.now() + 3_000; !done(); await new Promise((resolve) => setTimeout(resolve, 20))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
  }
}

const job = (webhookId: string): WebhookDelivery => ({
  webhook_id: webhookId,
  environment_id: 'env_parked',
  target: 'primary',
  url: 'https://hooks.example.com/latchkey',
  kind: 'forward',
  body: '{}',
  created_at: '2026-01-01T00:00:00.000Z',
  attempts: 7,
  holds: 0,
  revision: 2,
});

const doc = (webhookId: string): ParkedDeliveryDoc => ({
  _id: parkedDeliveryId(`${webhookId}:primary`, 2),
  environment_id: 'env_parked',
  due_at: new Date(0),
  job: job(webhookId),
});

/**
 * Collections of parked deliveries by due time, all due, and a bus that refuses the deliveries
 * `refusals` names with its error: what was enqueued, and what the attempts list was given.
 */
function parking(collections: Map<number, ParkedDeliveryDoc[]>, refusals: Record<string, AppError>) {
  const enqueued: string[] = [];
  const recorded: Array<Omit<DeliveryAttemptDoc, '_id' | 'environment_id'>> = [];
  const returning = startReturningParked({
    logger,
    pollMs: 20,
    parked: {
      dueCollections: async () => [...collections.keys()].sort((a, b) => a - b),
      async *deliveriesDueBy(by: number) {
        const docs = collections.get(by) ?? [];
        if (docs.length > 0) yield [...docs];
      },
      release: async (by: number, ids: readonly string[]) => void collections.set(by, (collections.get(by) ?? []).filter((kept) => !ids.includes(kept._id))),
      dropIfDone: async (by: number) => (collections.get(by)?.length === 0 ? collections.delete(by) : false),
    },
    deliveries: { recordAttempt: async (_environment, attempt) => void recorded.push(attempt) },
    bus: {
      enqueue: async (_contract, payload) => {
        const refusal = refusals[(payload as WebhookDelivery).webhook_id];
        if (refusal) throw refusal;
        enqueued.push((payload as WebhookDelivery).webhook_id);
      },
    },
  });
  return { enqueued, recorded, stop: () => returning.stop() };
}

describe('returning parked deliveries', () => {
  it('gives up a delivery JOBS refuses for good (recorded failed, nothing sent), and returns those after it', async () => {
    const collections = new Map([
      [1000, [doc('msg_refused'), doc('msg_beside')]],
      [2000, [doc('msg_later')]],
    ]);
    const { enqueued, recorded, stop } = parking(collections, { msg_refused: new AppError('invalid_body', 'The request is invalid') });
    try {
      await until(() => collections.size === 0, 'every parked delivery to be returned or given up');
      expect(enqueued.sort()).toEqual(['msg_beside', 'msg_later']);
      expect(recorded).toEqual([
        expect.objectContaining({ delivery: 'msg_refused:primary', webhook_id: 'msg_refused', attempt: 8, status: null, error: 'requeue_failed', outcome: 'failed', next_attempt_at: null }),
      ]);
    } finally {
      await stop();
    }
  });

  it('goes on past a collection that cannot be returned now, which is tried again at the next poll', async () => {
    const collections = new Map([
      [1000, [doc('msg_stuck')]],
      [2000, [doc('msg_later')]],
    ]);
    const { enqueued, recorded, stop } = parking(collections, { msg_stuck: new AppError('service_unavailable', 'the JOBS stream is full') });
    try {
      await until(() => enqueued.includes('msg_later'), 'the later collection to be returned');
      expect([...collections.keys()]).toEqual([1000]);
      expect(recorded).toEqual([]);
    } finally {
      await stop();
    }
  });
});
