import { describe, expect, it } from '@jest/globals';
import { vaultContracts } from '@latchkey/contracts';
import { parsePart } from '../../http/validate.js';
import { connectOAuth, startOAuthFromPage } from './connect-oauth.js';

/** A part of the request as the gateway reads it for the route (mount-routes.ts), or the error it answers. */
function read(part: 'query' | 'body', schema: unknown, value: unknown): unknown {
  try {
    return parsePart(part, schema as Parameters<typeof parsePart>[1], value);
  } catch (error) {
    return error;
  }
}

describe("an OAuth start's connection config", () => {
  it('is text of at most 1024 characters under field-safe names, as on the form routes, whichever way the flow starts', () => {
    const tooLong = { account_id: '1'.repeat(1025) };
    const longest = { account_id: '1'.repeat(1024) };
    const token = { connect_session_token: 'lk_cs_x' };
    expect(read('query', connectOAuth.schemas.query, { ...token, params: tooLong })).toMatchObject({ code: 'invalid_query_params' });
    expect(read('query', connectOAuth.schemas.query, { ...token, params: { $where: 'x' } })).toMatchObject({ code: 'invalid_query_params' });
    expect(read('query', connectOAuth.schemas.query, { ...token, params: longest })).toEqual({ ...token, params: longest });
    expect(read('body', startOAuthFromPage.schemas.body, { connection_config: tooLong })).toMatchObject({ code: 'invalid_body' });
    expect(read('body', startOAuthFromPage.schemas.body, { connection_config: longest })).toEqual({ connection_config: longest });
    // And the vault holds its own line: a caller other than the gateway meets the same bound.
    const start = { token: 't', integration: 'github', redirect_uri: 'https://example.test/oauth/callback' };
    expect(vaultContracts.startOAuth.request.safeParse({ ...start, connection_config: tooLong }).success).toBe(false);
    expect(vaultContracts.startOAuth.request.safeParse({ ...start, connection_config: longest }).success).toBe(true);
  });
});
