import { describe, expect, it } from '@jest/globals';
import {
  CONTRACT_ACCESS,
  SCOPES,
  SERVICE_NAMES,
  STREAMS,
  allContracts,
  expandScopes,
  inboxPrefixOf,
  natsPermissions,
  proxyContracts,
  pullStreamPrefixOf,
  renderNatsAuthorization,
} from './index.js';

describe('contracts', () => {
  it('write every subject once', () => {
    const subjects = allContracts.map((contract) => contract.subject);
    expect(new Set(subjects).size).toBe(subjects.length);
  });

  it('keep request subjects out of the JetStream streams', () => {
    for (const contract of allContracts) {
      const inStream = contract.subject.startsWith('events.') || contract.subject.startsWith('jobs.') || contract.subject.startsWith('operations.');
      expect(inStream).toBe(contract.kind === 'event' || contract.kind === 'job');
    }
    expect(STREAMS.events.subjects).toEqual(['events.>']);
  });
});

describe('scopes', () => {
  it('are the 30 scopes of the API document and the operations log\'s', () => {
    expect(SCOPES).toHaveLength(31);
    expect(new Set(SCOPES).size).toBe(31);
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

describe('NATS access', () => {
  it('names the server and callers (or publishers and consumers) of every contract, and nothing else', () => {
    for (const contract of allContracts) expect([contract.subject, CONTRACT_ACCESS.has(contract)]).toEqual([contract.subject, true]);
    expect(CONTRACT_ACCESS.size).toBe(allContracts.length);
  });

  it('lets only the proxy ask for plaintext credentials, on a subject naming it', () => {
    const subject = proxyContracts.getCredentials.subject;
    for (const service of SERVICE_NAMES) {
      const { publish, subscribe } = natsPermissions(service);
      const asks = publish.filter((allowed) => allowed.startsWith(subject));
      expect([service, asks]).toEqual([service, service === 'proxy' ? [`${subject}.proxy`] : []]);
      expect([service, subscribe.filter((allowed) => allowed.startsWith(subject))]).toEqual([service, service === 'credential-vault' ? [`${subject}.*`] : []]);
    }
  });

  it('keeps every identity to its own inboxes, and gives none a full wildcard', () => {
    for (const service of SERVICE_NAMES) {
      const { publish, subscribe } = natsPermissions(service);
      const inboxes = subscribe.filter((allowed) => allowed.startsWith('_INBOX'));
      expect([service, inboxes]).toEqual([service, [`${inboxPrefixOf(service)}.>`]]);
      // Into other identities' inboxes, only their pull streams (never their reply inboxes).
      for (const allowed of publish.filter((candidate) => candidate.startsWith('_INBOX'))) expect(allowed).toMatch(/^_INBOX\.[a-z-]+\.s\.\*$/);
      for (const allowed of [...publish, ...subscribe]) {
        expect(allowed).not.toMatch(/^(>|\*|[^.]*\.>|\$JS\.API\.>|\$KV\.>|\$SYS.*)$/);
      }
    }
  });

  it("lets a service read only the pull streams of services it exchanges requests with: the proxy's provider answers are no business of the webhook-router's", () => {
    const streamsOf = (service: (typeof SERVICE_NAMES)[number]) => natsPermissions(service).publish.filter((allowed) => /^_INBOX\.[a-z-]+\.s\.\*$/.test(allowed));
    const proxyStreams = `${pullStreamPrefixOf(inboxPrefixOf('proxy'))}.*`;
    expect(streamsOf('webhook-router')).not.toContain(proxyStreams);
    expect(streamsOf('sync-scheduler')).not.toContain(proxyStreams);
    // The proxy's callers read its answers; it reads their request bodies.
    expect(streamsOf('gateway')).toContain(proxyStreams);
    expect(streamsOf('action-runner')).toContain(proxyStreams);
    expect(streamsOf('proxy')).toEqual(expect.arrayContaining([`${pullStreamPrefixOf(inboxPrefixOf('gateway'))}.*`, `${pullStreamPrefixOf(inboxPrefixOf('action-runner'))}.*`]));
  });

  it('pins each durable consumer to its own subject', () => {
    const scheduler = natsPermissions('sync-scheduler').publish.filter((allowed) => allowed.startsWith('$JS.API.CONSUMER.CREATE.'));
    expect(scheduler).toContain('$JS.API.CONSUMER.CREATE.EVENTS.sync-scheduler-connection-created.events.connection.created');
    expect(natsPermissions('proxy').publish.filter((allowed) => allowed.startsWith('$JS.API.CONSUMER'))).toEqual([]);
  });

  it('renders a server config with one user per service, and the observer only for tests', () => {
    const production = renderNatsAuthorization();
    for (const service of SERVICE_NAMES) expect(production).toContain(`user: "${service}"`);
    expect(production).not.toContain('observer');
    expect(renderNatsAuthorization({ testIdentities: true })).toContain('user: "observer"');
  });
});
