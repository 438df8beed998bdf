import { describe, expect, it } from '@jest/globals';
import { redactUri } from './run-service.js';

describe('redactUri', () => {
  it('hides the password of every server in a comma-separated list, keeping hosts and paths', () => {
    const redacted = redactUri('nats://gateway:first-secret@nats-0:4222,nats://gateway:second-secret@nats-1:4222,nats://nats-2:4222');
    expect(redacted).toBe('nats://***@nats-0:4222,nats://***@nats-1:4222,nats://nats-2:4222');
    expect(redactUri('mongodb://user:secret@db-0,db-1/latchkey?replicaSet=rs0')).toBe('mongodb://***@db-0,db-1/latchkey?replicaSet=rs0');
    expect(redactUri('nats://127.0.0.1:4222')).toBe('nats://127.0.0.1:4222');
  });

  it('hides a password holding a slash, and the values of secret options in the query', () => {
    expect(redactUri('mongodb://user:pa/ss@db-0:27017/latchkey')).toBe('mongodb://***@db-0:27017/latchkey');
    const redacted = redactUri(
      'mongodb://db-0/latchkey?replicaSet=rs0&proxyPassword=proxy-secret&tlsCertificateKeyFilePassword=key-secret&authMechanismProperties=AWS_SESSION_TOKEN:aws-secret&authSource=admin',
    );
    expect(redacted).toBe('mongodb://db-0/latchkey?replicaSet=rs0&proxyPassword=***&tlsCertificateKeyFilePassword=***&authMechanismProperties=***&authSource=admin');
    expect(redactUri('mongodb://u:p@db/x?authMechanismProperties=A:b@c')).toBe('mongodb://***@db/x?authMechanismProperties=***');
  });

  it('hides a password holding a comma, a space, a question mark or an @', () => {
    // The MongoDB driver takes a password up to the first `@`, whatever it holds before it.
    expect(redactUri('mongodb://user:pa,ss@db-0,db-1/latchkey')).toBe('mongodb://***@db-0,db-1/latchkey');
    expect(redactUri('mongodb://user:pa ss@db-0/latchkey')).toBe('mongodb://***@db-0/latchkey');
    expect(redactUri('mongodb://user:pa?ss@db-0/latchkey?replicaSet=rs0')).toBe('mongodb://***@db-0/latchkey?replicaSet=rs0');
    expect(redactUri('nats://gateway:p@ss@nats-0:4222,nats://gateway:q@nats-1:4222')).toBe('nats://***@nats-0:4222,nats://***@nats-1:4222');
  });
});
