import { describe, expect, it } from '@jest/globals';
import { subscribes, webhookType } from './webhook-match.js';

describe('webhook matching', () => {
  it('reads the type from the usual fields', () => {
    expect(webhookType({ type: 'item.updated', event: 'x' })).toBe('item.updated');
    expect(webhookType({ event_type: 'ticket.created' })).toBe('ticket.created');
    expect(webhookType({ topic: 'orders/create' })).toBe('orders/create');
    expect(webhookType({ id: 1 })).toBeUndefined();
    expect(webhookType('text')).toBeUndefined();
    expect(webhookType([{ type: 'a' }])).toBeUndefined();
  });

  it('matches exact types, prefixes and everything', () => {
    expect(subscribes(['item.updated'], 'item.updated')).toBe(true);
    expect(subscribes(['item.updated'], 'item.deleted')).toBe(false);
    expect(subscribes(['item.*'], 'item.deleted')).toBe(true);
    expect(subscribes(['item.*'], 'items.deleted')).toBe(false);
    expect(subscribes(['*'], undefined)).toBe(true);
    expect(subscribes(['item.updated'], undefined)).toBe(false);
  });
});
