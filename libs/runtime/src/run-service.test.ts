import { describe, expect, it } from '@jest/globals';
import { redactUri } from './run-service.js';

describe('redactUri', () => {
  it('hides the password of every server in a comma-separated list, keeping hosts and paths', () => {
    const redacted = redactUri('nats://gateway:first-secret@nats-0:4222,nats://gateway:second-secret@nats-1:4222,nats://nats-2:4222');
    expect(redacted).toBe('nats://***@nats-0:4222,nats://***@nats-1:4222,nats://nats-2:4222');
    expect(redactUri('mongodb://user:secret@db-0,db-1/latchkey?replicaSet=rs0')).toBe('mongodb://***@db-0,db-1/latchkey?replicaSet=rs0');
    expect(redactUri('nats://127.0.0.1:4222')).toBe('nats://127.0.0.1:4222');
  });
});
