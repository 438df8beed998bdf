import { describe, expect, it } from '@jest/globals';
import { SCOPES, STREAMS, allContracts, expandScopes } from './index.js';

describe('contracts', () => {
  it('write every subject once', () => {
    const subjects = allContracts.map((contract) => contract.subject);
    expect(new Set(subjects).size).toBe(subjects.length);
  });

  it('keep request subjects out of the JetStream streams', () => {
    for (const contract of allContracts) {
      const inStream = contract.subject.startsWith('events.') || contract.subject.startsWith('jobs.');
      expect(inStream).toBe(contract.kind === 'event' || contract.kind === 'job');
    }
    expect(STREAMS.events.subjects).toEqual(['events.>']);
  });
});

describe('scopes', () => {
  it('are the 30 scopes of the API document', () => {
    expect(SCOPES).toHaveLength(30);
    expect(new Set(SCOPES).size).toBe(30);
  });

  it('let a _credentials scope include its plain scope, not the reverse', () => {
    const withCredentials = expandScopes(['environment:connections:read_credentials']);
    expect(withCredentials.has('environment:connections:read')).toBe(true);
    const plain = expandScopes(['environment:connections:read']);
    expect(plain.has('environment:connections:read_credentials')).toBe(false);
  });

  it('give full access every scope', () => {
    expect(expandScopes('full_access').size).toBe(SCOPES.length);
  });
});
