import { describe, expect, it } from '@jest/globals';
import { JetStreamApiError } from '@nats-io/jetstream';
import { isJetStreamSettling } from './jetstream-setup.js';

const apiError = (code: number, err_code: number, description: string) => new JetStreamApiError({ code, err_code, description });

describe('isJetStreamSettling', () => {
  it('retries what a cluster says while it elects or places replicas', () => {
    expect(isJetStreamSettling(apiError(503, 10008, 'JetStream system temporarily unavailable'))).toBe(true);
    expect(isJetStreamSettling(apiError(500, 10023, 'insufficient resources'))).toBe(true);
    expect(isJetStreamSettling(apiError(400, 10005, 'no suitable peers for placement'))).toBe(true);
    const notEnabled = new Error('jetstream is not enabled');
    notEnabled.name = 'JetStreamNotEnabled';
    expect(isJetStreamSettling(notEnabled)).toBe(true);
    expect(isJetStreamSettling(new Error('timeout'))).toBe(true);
  });

  it('does not retry a setting NATS refuses for good', () => {
    expect(isJetStreamSettling(apiError(500, 10074, 'replicas > 1 not supported in non-clustered mode'))).toBe(false);
    expect(isJetStreamSettling(apiError(400, 10058, 'stream name already in use with a different configuration'))).toBe(false);
    expect(isJetStreamSettling(new Error('permissions violation'))).toBe(false);
  });
});
