import { describe, expect, it } from '@jest/globals';
import { parseProxyReplyMeta, proxyReplyMeta, proxyRequestMeta, safeParseProxyRequestMeta } from './index.js';

const call = {
  environment_id: 'env_1',
  key_id: 'key_1',
  connection_id: 'conn-1',
  provider_config_key: 'crm',
  method: 'GET',
  path: 'contacts',
  query: 'limit=10',
  headers: [
    ['Accept', 'application/json'],
    ['X-Trace', ''],
  ],
  retries: 2,
  retry_on: [429, 503],
  body: 'inline',
  request_id: 'req-1',
};
const answer = { ok: true, status: 200, headers: [['Content-Type', 'application/json']], body: 'inline' };

/** Variants of a well-formed value: each change's members replace the value's, `'<delete>'` removes one. */
function variants(base: Record<string, unknown>, changes: Array<Record<string, unknown>>): Array<Record<string, unknown>> {
  return changes.map((change) => {
    const value: Record<string, unknown> = { ...base, ...change };
    for (const [key, replacement] of Object.entries(change)) if (replacement === '<delete>') delete value[key];
    return value;
  });
}

const requestCases = [
  call,
  ...variants(call, [
    { method: 'OPTIONS', body: { stream: '_INBOX.x' }, decompress: false, base_url_override: 'https://eu.example.com' },
    { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'a=1' },
    { request_id: '<delete>', retries: 0, retry_on: [] },
    { explicit_headers: [0, 1] },
    { explicit_headers: [] },
    // Each of these breaks the schema, or leaves the shape the fast check takes.
    { method: 'TRACE' },
    { method: 'get' },
    { retries: 11 },
    { retries: -1 },
    { retries: 1.5 },
    { retries: '2' },
    { retry_on: [99] },
    { retry_on: [200] },
    { retry_on: [399] },
    { retry_on: [600] },
    { retry_on: [200.5] },
    { retry_on: '429' },
    { headers: [['only-a-name']] },
    { headers: [['a', 'b', 'c']] },
    { headers: [['a', 1]] },
    { headers: { a: 'b' } },
    { body: 'stream' },
    { body: { stream: 1 } },
    { body: { stream: 'x', extra: true } },
    { body: null },
    { request_id: 'r'.repeat(129) },
    { request_id: 'r'.repeat(128) },
    { traceparent: 't'.repeat(129) },
    { tracestate: 's'.repeat(513) },
    { tracestate: 's'.repeat(512) },
    { decompress: 'true' },
    { explicit_headers: [-1] },
    { explicit_headers: [0.5] },
    { explicit_headers: ['0'] },
    { explicit_headers: 0 },
    { base_url_override: 42 },
    { environment_id: 7 },
    { key_id: null },
    { path: '<delete>' },
    { query: '<delete>' },
    { connection_id: '<delete>' },
    { unknown_member: 'dropped by zod' },
    { request_id: undefined },
  ]),
  null,
  [],
  'text',
  42,
];

const replyCases = [
  answer,
  ...variants(answer, [
    { body: { stream: '_INBOX.y' }, status: 204, headers: [] },
    { status: 200.5 },
    { status: '200' },
    { status: 2 ** 60 },
    { headers: [['a']] },
    { body: 'streamed' },
    { ok: 'true' },
    { extra: 1 },
    { ok: false, error: { code: 'unknown_connection', message: 'No such connection' } },
  ]),
  { ok: false, error: { code: 'upstream_timeout', message: 'late', payload: { after_ms: 10 } } },
  { ok: false, error: { code: 1, message: 'late' } },
  null,
];

describe('the proxy hop metas, read without zod when well formed', () => {
  it('take and refuse exactly what zod takes and refuses, and give what it gives', () => {
    for (const value of requestCases) {
      const fast = safeParseProxyRequestMeta(value);
      const slow = proxyRequestMeta.safeParse(value);
      expect({ value, success: fast.success }).toEqual({ value, success: slow.success });
      if (fast.success && slow.success) expect(fast.data).toEqual(slow.data);
      else expect(fast.error?.issues).toEqual(slow.error?.issues);
    }
    for (const value of replyCases) {
      const read = () => parseProxyReplyMeta(value);
      const slow = proxyReplyMeta.safeParse(value);
      if (slow.success) expect(read()).toEqual(slow.data);
      else expect(read).toThrow();
    }
  });

  it('hand a well-formed call on as it came, with no copy', () => {
    const result = safeParseProxyRequestMeta(call);
    expect(result.success && result.data).toBe(call);
    expect(parseProxyReplyMeta(answer)).toBe(answer);
  });
});
