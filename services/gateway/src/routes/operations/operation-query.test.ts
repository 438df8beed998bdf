import { describe, expect, it } from '@jest/globals';
import { operationFilterOf, operationId, operationListQuery } from './operation-query.js';

describe('the operations list query', () => {
  it('takes every filter and gives the repository its filter', () => {
    const query = operationListQuery.parse({
      type: 'proxy,refresh',
      status: 'failure',
      integration_id: 'github',
      connection_id: 'c1',
      from: '2026-01-01T00:00:00Z',
      to: '2026-01-02T00:00:00+01:00',
      limit: '20',
      cursor: '00mhx0a1bAbCdEfGhIjKl',
    });
    expect(query.limit).toBe(20);
    expect(operationFilterOf(query)).toEqual({
      types: ['proxy', 'refresh'],
      status: 'failure',
      integration_id: 'github',
      connection_id: 'c1',
      from: new Date('2026-01-01T00:00:00Z'),
      to: new Date('2026-01-01T23:00:00Z'),
      cursor: '00mhx0a1bAbCdEfGhIjKl',
    });
  });

  it('defaults to the newest 100 of every type', () => {
    const query = operationListQuery.parse({});
    expect(query.limit).toBe(100);
    expect(operationFilterOf(query)).toEqual({});
  });

  it('takes repeated types and drops repeats', () => {
    expect(operationFilterOf(operationListQuery.parse({ type: ['deploy', 'deploy,sync_run'] })).types).toEqual(['deploy', 'sync_run']);
  });

  it('refuses unknown types, statuses and parameters, bad times, a reversed range and a foreign cursor', () => {
    expect(operationListQuery.safeParse({ type: 'proxy,unknown' }).success).toBe(false);
    expect(operationListQuery.safeParse({ status: 'running' }).success).toBe(false);
    expect(operationListQuery.safeParse({ secret: 'x' }).success).toBe(false);
    expect(operationListQuery.safeParse({ from: 'yesterday' }).success).toBe(false);
    expect(operationListQuery.safeParse({ from: '2026-01-02T00:00:00Z', to: '2026-01-01T00:00:00Z' }).success).toBe(false);
    expect(operationListQuery.safeParse({ limit: '0' }).success).toBe(false);
    expect(operationListQuery.safeParse({ limit: '1001' }).success).toBe(false);
    expect(operationListQuery.safeParse({ cursor: 'env_1:00mhx0a1b' }).success).toBe(false);
    expect(operationId.safeParse('../../x').success).toBe(false);
  });
});
