import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { main } from './command.js';

describe('the latchkey command line', () => {
  let stderr: string;
  beforeEach(() => {
    stderr = '';
    jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    });
  });
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('answers an unknown or malformed option with the usage and exit code 2, not a stack trace', async () => {
    await expect(main(['deploy', '--env', 'dev'])).resolves.toBe(2);
    expect(stderr).toContain("unknown option '--env'");
    expect(stderr).toContain('usage: latchkey init <dir>');
    stderr = '';
    await expect(main(['deploy', '--environment'])).resolves.toBe(2);
    expect(stderr).toContain('usage: latchkey init <dir>');
  });

  it('answers --help with the usage and an unknown command with exit code 2', async () => {
    await expect(main(['--help'])).resolves.toBe(0);
    expect(stderr).toContain('usage:');
    await expect(main(['publish'])).resolves.toBe(2);
  });
});
