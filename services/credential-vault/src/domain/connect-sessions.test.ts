import { describe, expect, it } from '@jest/globals';
import type { ConnectSessionDoc } from '../db/connect-session-model.js';
import { checkKeptConfig, reconnectConnectionConfig, reconnectedTags, sessionConnectionConfig } from './connect-sessions.js';

const provider = {
  authorization_url: 'https://${connectionConfig.subdomain}.provider.example/authorize',
  token_url: 'https://${connectionConfig.subdomain}.provider.example/token',
  connection_configuration: ['subdomain', 'region'],
  connection_config: { subdomain: { pattern: '^[A-Za-z0-9-]+$' } },
};

function session(defaults: Record<string, unknown>): ConnectSessionDoc {
  return { integrations_config_defaults: { tenant: { connection_config: defaults } } } as unknown as ConnectSessionDoc;
}

const refusal = (run: () => unknown) => {
  try {
    run();
    return undefined;
  } catch (error) {
    return (error as { code: string; errors?: Array<{ code: string; path: string }> }).errors?.[0];
  }
};

describe("a connect flow's connection config", () => {
  it("starts from the customer's values and takes the end user's for the fields left open", () => {
    expect(sessionConnectionConfig(session({ subdomain: 'acme', oauth_client_id_override: '' }), 'tenant', provider, { region: 'eu' })).toEqual({ subdomain: 'acme', region: 'eu' });
    expect(sessionConnectionConfig(session({ subdomain: '' }), 'tenant', provider, { subdomain: 'mine' })).toEqual({ subdomain: 'mine' });
  });

  it('case 3: refuses an end user changing a value the customer set, and accepts the same value back', () => {
    expect(refusal(() => sessionConnectionConfig(session({ subdomain: 'acme' }), 'tenant', provider, { subdomain: 'attacker' }))).toMatchObject({ code: 'not_allowed', path: 'connection_config.subdomain' });
    expect(sessionConnectionConfig(session({ subdomain: 'acme', custom: 'x' }), 'tenant', provider, { subdomain: 'acme', custom: 'x' })).toEqual({ subdomain: 'acme', custom: 'x' });
  });

  it('case 3: refuses fields the provider does not declare and values off its pattern', () => {
    expect(refusal(() => sessionConnectionConfig(session({}), 'tenant', provider, { token_host: 'evil.example' }))).toMatchObject({ code: 'not_allowed' });
    expect(refusal(() => sessionConnectionConfig(session({}), 'tenant', provider, { oauth_client_id_override: 'x' }))).toMatchObject({ code: 'not_allowed' });
    expect(refusal(() => sessionConnectionConfig(session({}), 'tenant', provider, { subdomain: 'evil.example/x?' }))).toMatchObject({ path: 'connection_config.subdomain' });
  });

  it("takes only text from an end user, whatever forwarded it: an array passes a pattern as its String()", () => {
    const withAccount = { ...provider, connection_configuration: ['subdomain', 'account_id'], connection_config: { ...provider.connection_config, account_id: { pattern: '^[0-9]+$' } } };
    expect(refusal(() => sessionConnectionConfig(session({}), 'tenant', withAccount, { account_id: ['123'] }))).toMatchObject({ code: 'invalid_type', path: 'connection_config.account_id' });
    expect(refusal(() => sessionConnectionConfig(session({}), 'tenant', withAccount, { account_id: { id: '123' } }))).toMatchObject({ code: 'invalid_type' });
    expect(refusal(() => sessionConnectionConfig(session({}), 'tenant', provider, { region: 7 }))).toMatchObject({ code: 'invalid_type', path: 'connection_config.region' });
    // The customer's null placeholder comes back as it was in a flow's saved config.
    expect(sessionConnectionConfig(session({ region: null }), 'tenant', provider, { region: null, subdomain: 'mine' })).toEqual({ region: null, subdomain: 'mine' });
  });

  it('case 3: checks host-bearing values whoever set them', () => {
    expect(refusal(() => sessionConnectionConfig(session({ subdomain: '127.0.0.1:4701' }), 'tenant', provider, {}))).toMatchObject({ code: 'invalid_host' });
  });

  // A self-hosted provider's token URL is wholly the end user's to name (Keycloak, Mastodon…):
  // with the integration's own client, its secret would go to whatever host the end user typed.
  const selfHosted = {
    authorization_url: 'https://${connectionConfig.host}/authorize',
    token_url: 'https://${connectionConfig.host}/token',
    connection_configuration: ['host'],
    connection_config: { host: { pattern: '^[A-Za-z0-9.-]+(:[0-9]+)?$' } },
  };

  it("case 3: lets no end user name the host the integration's client secret goes to", () => {
    expect(refusal(() => sessionConnectionConfig(session({}), 'tenant', selfHosted, { host: 'evil.example' }, { customerClient: true }))).toMatchObject({
      code: 'not_allowed',
      path: 'connection_config.host',
    });
    // The customer's host, or the end user's own client, is fine.
    expect(sessionConnectionConfig(session({ host: 'sso.customer.example' }), 'tenant', selfHosted, { host: 'sso.customer.example' }, { customerClient: true })).toEqual({ host: 'sso.customer.example' });
    expect(sessionConnectionConfig(session({}), 'tenant', selfHosted, { host: 'sso.enduser.example' })).toEqual({ host: 'sso.enduser.example' });
    // A subdomain under the provider's own domain stays the end user's to choose.
    expect(sessionConnectionConfig(session({}), 'tenant', provider, { subdomain: 'mine' }, { customerClient: true })).toEqual({ subdomain: 'mine' });
  });
});

describe("a reconnect's connection config", () => {
  const kept = { subdomain: 'acme' };

  it("is the connection's own, whatever the session's defaults say", () => {
    expect(reconnectConnectionConfig(session({}), 'tenant', provider, kept)).toEqual({ subdomain: 'acme' });
    expect(reconnectConnectionConfig(session({ subdomain: 'other', region: 'eu' }), 'tenant', provider, kept)).toEqual({ subdomain: 'acme' });
  });

  it("takes the connection's own values back from the end user, and refuses any other or any it lacks", () => {
    expect(reconnectConnectionConfig(session({}), 'tenant', provider, kept, { subdomain: 'acme' })).toEqual({ subdomain: 'acme' });
    expect(refusal(() => reconnectConnectionConfig(session({}), 'tenant', provider, kept, { subdomain: 'evilcorp' }))).toMatchObject({ code: 'not_allowed', path: 'connection_config.subdomain' });
    expect(refusal(() => reconnectConnectionConfig(session({}), 'tenant', provider, kept, { subdomain: 'acme', region: 'eu' }))).toMatchObject({ code: 'not_allowed', path: 'connection_config.region' });
    // The check saveConnection makes on the document it replaces the credentials of.
    expect(refusal(() => checkKeptConfig({ subdomain: 'acme', ids: [1, 2] }, { subdomain: 'acme', ids: [1, 3] }))).toMatchObject({ path: 'connection_config.ids' });
    expect(() => checkKeptConfig({ subdomain: 'acme', ids: [1, 2] }, { subdomain: 'acme', ids: [1, 2] })).not.toThrow();
  });

  // A connection made with the end user's own client may name their own server as its host; a
  // reconnect with the customer's client would send the customer's client secret there.
  const selfHosted = {
    authorization_url: 'https://${connectionConfig.host}/authorize',
    token_url: 'https://${connectionConfig.host}/token',
    connection_configuration: ['host'],
    connection_config: { host: { pattern: '^[A-Za-z0-9.-]+(:[0-9]+)?$' } },
  };

  it("lets a customer's client go only to a self-hosted host the customer names in the reconnect session", () => {
    const enduserHost = { host: 'sso.enduser.example' };
    expect(refusal(() => reconnectConnectionConfig(session({}), 'tenant', selfHosted, enduserHost, {}, { customerClient: true }))).toMatchObject({
      code: 'not_allowed',
      path: 'connection_config.host',
    });
    expect(reconnectConnectionConfig(session({ host: 'sso.enduser.example' }), 'tenant', selfHosted, enduserHost, {}, { customerClient: true })).toEqual(enduserHost);
    expect(reconnectConnectionConfig(session({}), 'tenant', selfHosted, enduserHost)).toEqual(enduserHost);
  });
});

describe("a reconnect's tags", () => {
  const named = (prefix: string, count: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`${prefix}${i}`, 'v']));

  it("are the connection's with the session's over them, up to 10 in all, a key both have counted once", () => {
    expect(reconnectedTags({ a: '1', b: '2' }, { b: 'new' }, 'flow')).toEqual({ a: '1', b: 'new' });
    expect(Object.keys(reconnectedTags(named('old', 6), { ...named('new', 4), old0: 'x' }, 'session'))).toHaveLength(10);
  });

  it('are refused past 10, naming tags, with a message for whoever meets it', () => {
    expect(refusal(() => reconnectedTags(named('old', 6), named('new', 5), 'session'))).toMatchObject({ code: 'too_many_tags', path: 'tags' });
    expect(() => reconnectedTags(named('old', 6), named('new', 5), 'session')).toThrow(/has 6 tags.*11 tags, more than 10/);
    expect(() => reconnectedTags(named('later', 8), named('new', 4), 'flow')).toThrow(/not reconnected.*12 tags, more than 10/);
  });
});
