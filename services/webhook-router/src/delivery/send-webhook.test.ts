import { describe, expect, it } from '@jest/globals';
import { Webhook } from 'standardwebhooks';
import { signatureHeaders } from './send-webhook.js';

describe('Standard Webhooks signatures', () => {
  it('carry one v1 signature per key, each verifiable on its own (rotation overlap)', () => {
    const fresh = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
    const old = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;
    const body = '{"type":"forward"}';
    const headers = signatureHeaders({ webhookId: 'msg_1', at: new Date(), body, keys: [fresh, old] });
    expect(headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(new Webhook(fresh).verify(body, headers)).toEqual({ type: 'forward' });
    expect(new Webhook(old).verify(body, headers)).toEqual({ type: 'forward' });
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 3).toString('base64')}`).verify(body, headers)).toThrow();
  });
});
