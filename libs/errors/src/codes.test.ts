import { describe, expect, it } from '@jest/globals';
import { AppError, ERROR_CODES, toAppError } from './index.js';

describe('error codes', () => {
  it('are snake_case and map to 4xx/5xx statuses', () => {
    for (const [code, { status }] of Object.entries(ERROR_CODES)) {
      expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(status).toBeGreaterThanOrEqual(400);
      expect(status).toBeLessThan(600);
    }
  });

  it('survive a round trip through the wire form', () => {
    const original = new AppError('invalid_body', 'bad', {
      errors: [{ code: 'invalid_type', message: 'expected string', path: 'name' }],
    });
    const copy = AppError.fromBody(JSON.parse(JSON.stringify(original.toBody())));
    expect(copy.code).toBe('invalid_body');
    expect(copy.status).toBe(400);
    expect(copy.errors).toEqual(original.errors);
  });

  it('turn unknown codes and foreign errors into internal_error without their text', () => {
    expect(AppError.fromBody({ code: 'no_such_code', message: 'x' }).code).toBe('internal_error');
    const wrapped = toAppError(new Error('password=hunter2'));
    expect(wrapped.code).toBe('internal_error');
    expect(wrapped.message).not.toContain('hunter2');
  });
});
