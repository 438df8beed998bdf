import { describe, expect, it } from '@jest/globals';
import { AppError } from '@latchkey/errors';
import { parsePart } from '../../http/validate.js';
import { saveApiKey, saveBasic, saveTypedCredentials } from './session-credentials.js';

/** The body as the gateway reads it for the route (mount-routes.ts), or the error it answers. */
function read(route: { schemas: { body?: unknown } }, body: unknown): unknown {
  try {
    return parsePart('body', route.schemas.body as Parameters<typeof parsePart>[1], body);
  } catch (error) {
    return error;
  }
}

describe("an end user's form credentials", () => {
  const routes = [saveApiKey, saveBasic, saveTypedCredentials];

  it('carry connection config as text: an array or object for a field is 400 invalid_body naming it', () => {
    for (const route of routes) {
      for (const value of [['123'], { id: '123' }, 123, null]) {
        const error = read(route, { apiKey: 'k', connection_config: { account_id: value } });
        expect(error).toBeInstanceOf(AppError);
        expect(error).toMatchObject({ code: 'invalid_body', status: 400 });
        expect((error as AppError).errors?.map((item) => item.path)).toContain('connection_config.account_id');
      }
    }
  });

  it('carry connection config values of at most 1024 characters, under field-safe names', () => {
    expect(read(saveApiKey, { apiKey: 'k', connection_config: { account_id: '1'.repeat(1025) } })).toMatchObject({ code: 'invalid_body' });
    expect(read(saveApiKey, { apiKey: 'k', connection_config: { $where: 'x' } })).toMatchObject({ code: 'invalid_body' });
    expect(read(saveApiKey, { apiKey: 'k', connection_config: { account_id: '1'.repeat(1024) } })).toEqual({ apiKey: 'k', connection_config: { account_id: '1'.repeat(1024) } });
  });
});
