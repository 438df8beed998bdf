import { describe, expect, it } from '@jest/globals';
import { OwnHeaders } from './own-headers.js';

const ours = () => new OwnHeaders().setHeader('X-Request-Id', 'req-1').setHeader('X-RateLimit-Limit', 6000).setHeader('X-RateLimit-Remaining', 5999);

describe('OwnHeaders', () => {
  it('keeps one value per name, as setHeader does, letter case aside', () => {
    const headers = ours().setHeader('retry-after', 3).setHeader('Retry-After', 5);
    expect(headers.with([])).toEqual(['X-Request-Id', 'req-1', 'X-RateLimit-Limit', '6000', 'X-RateLimit-Remaining', '5999', 'retry-after', '5']);
  });

  it("puts the provider's headers after ours, every repeat of a name included", () => {
    const head = ours().with([
      ['content-type', 'text/plain'],
      ['Set-Cookie', 'a=1'],
      ['Set-Cookie', 'b=2'],
    ]);
    expect(head).toEqual(['X-Request-Id', 'req-1', 'X-RateLimit-Limit', '6000', 'X-RateLimit-Remaining', '5999', 'content-type', 'text/plain', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2']);
  });

  it("lets a provider's header replace ours of the same name", () => {
    const head = ours().with([
      ['x-ratelimit-limit', '77'],
      ['X-REQUEST-ID', 'theirs'],
    ]);
    expect(head).toEqual(['X-RateLimit-Remaining', '5999', 'x-ratelimit-limit', '77', 'X-REQUEST-ID', 'theirs']);
  });

  it('adds the length of a whole body unless the headers frame it already', () => {
    expect(ours().with([['content-type', 'text/plain']], 11)).toEqual([
      'X-Request-Id',
      'req-1',
      'X-RateLimit-Limit',
      '6000',
      'X-RateLimit-Remaining',
      '5999',
      'content-type',
      'text/plain',
      'Content-Length',
      '11',
    ]);
    expect(ours().with([['Content-Length', '11']], 11).filter((item) => /^content-length$/i.test(item))).toHaveLength(1);
    expect(ours().with([['transfer-encoding', 'chunked']], 11).filter((item) => /^content-length$/i.test(item))).toHaveLength(0);
    expect(ours().with([['content-type', 'text/plain']]).filter((item) => /^content-length$/i.test(item))).toHaveLength(0);
  });
});
