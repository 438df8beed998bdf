import { describe, expect, it } from '@jest/globals';
import { ERROR_CODES } from '@latchkey/errors';
import { ERROR_STATUSES } from './error-statuses.js';

describe("the client's copy of the error statuses", () => {
  it('is the error table of the server, code for code', () => {
    const server = Object.fromEntries(Object.entries(ERROR_CODES).map(([code, entry]) => [code, entry.status]));
    expect(ERROR_STATUSES).toEqual(server);
  });
});
