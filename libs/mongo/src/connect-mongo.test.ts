import { describe, expect, it } from '@jest/globals';
import { databaseUnavailable, isMongoUnavailable } from './connect-mongo.js';

const named = (name: string) => Object.assign(new Error('x'), { name });

describe('isMongoUnavailable', () => {
  it('recognises the driver’s outage errors, wrapped or not, and raw socket failures', () => {
    expect(isMongoUnavailable(named('MongoServerSelectionError'))).toBe(true);
    expect(isMongoUnavailable(named('MongoNetworkError'))).toBe(true);
    expect(isMongoUnavailable(new Error('outer', { cause: named('MongoPoolClearedError') }))).toBe(true);
    expect(isMongoUnavailable(Object.assign(new Error('This socket has been ended by the other party'), { code: 'EPIPE' }))).toBe(true);
    expect(isMongoUnavailable(Object.assign(new Error('Operation `vault_connections.findOne()` buffering timed out after 10000ms'), { name: 'MongooseError' }))).toBe(true);
  });
  it('gives the outage its code: 503 service_unavailable, retryable, naming who cannot reach it', () => {
    const error = databaseUnavailable(named('MongoNetworkError'), 'The gateway');
    expect(error?.toBody()).toMatchObject({ code: 'service_unavailable', message: 'The gateway cannot reach its database; retry shortly' });
    expect(error?.retryable).toBe(true);
    expect(databaseUnavailable(new TypeError('bad'))).toBeUndefined();
  });
  it('leaves query errors and everything else alone', () => {
    expect(isMongoUnavailable(Object.assign(named('MongoServerError'), { code: 11000 }))).toBe(false);
    expect(isMongoUnavailable(new TypeError('bad'))).toBe(false);
    expect(isMongoUnavailable(undefined)).toBe(false);
  });
});
