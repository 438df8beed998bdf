import { describe, expect, it } from '@jest/globals';
import type { ProxyCredentials, ProxyRequestMeta } from '@latchkey/contracts';
import { proxyMetaFixture } from './meta-fixture.js';
import { checkedPath, hostAllowed, targetUrl } from './upstream-target.js';

const credentials: ProxyCredentials = {
  id: 'c',
  provider: 'p',
  auth_mode: 'API_KEY',
  expires_at: null,
  base_url: 'https://api.example.com/v2',
  allowed_hosts: ['eu.example.com', '*.sandbox.example.com', 'other.example.com:8443'],
  headers: { 'X-Api-Key': 'k' },
  query: {},
  decompress: false,
};
const meta = (path: string, override?: string, query = ''): ProxyRequestMeta =>
  proxyMetaFixture(path, { environment_id: 'e', key_id: 'k', connection_id: 'c', provider_config_key: 'i', query, ...(override === undefined ? {} : { base_url_override: override }) });
const code = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
};

describe('checkedPath', () => {
  it('keeps ordinary paths, encoded slashes and percent signs', () => {
    expect(checkedPath('/items/42')).toBe('items/42');
    expect(checkedPath('projects/group%2Fproject')).toBe('projects/group%2Fproject');
    expect(checkedPath('a/100%25/b..c/.well-known')).toBe('a/100%25/b..c/.well-known');
  });

  it('refuses every form of dot segment', () => {
    for (const path of ['../x', 'a/../../x', '%2e%2e/x', '%2e%2E/x', '.%2e/x', '..%2fx', '..%2Fx', '..\\x', 'a\\..\\x', '%252e%252e/x', '%25252e%25252e%25252fx', './x', 'a/.']) {
      expect(code(() => checkedPath(path))).toBe('invalid_uri_params');
    }
  });

  it('refuses malformed escapes, control characters and fragments', () => {
    for (const path of ['a%E0%A4%A', 'a%zz', 'a\nb', 'a#b']) expect(code(() => checkedPath(path))).toBe('invalid_uri_params');
  });
});

describe('hostAllowed', () => {
  it('matches exact hosts and subdomain wildcards, port included', () => {
    const allowed = ['api.example.com', '*.example.org', 'x.example.net:8443'];
    expect(hostAllowed('api.example.com', allowed)).toBe(true);
    expect(hostAllowed('a.b.example.org', allowed)).toBe(true);
    expect(hostAllowed('x.example.net:8443', allowed)).toBe(true);
    for (const host of ['example.org', 'evilexample.org', 'api.example.com:444', 'api.example.com.evil.example', 'x.example.net']) {
      expect(hostAllowed(host, allowed)).toBe(false);
    }
  });
});

describe('targetUrl', () => {
  it('joins the base path and the checked path, with the query', () => {
    expect(targetUrl(meta('/items', undefined, 'a=1'), credentials).toString()).toBe('https://api.example.com/v2/items?a=1');
    expect(targetUrl(meta('items?limit=2'), credentials).toString()).toBe('https://api.example.com/v2/items?limit=2');
  });

  it('drops a caller query parameter named like an injected one', () => {
    const url = targetUrl(meta('x', undefined, 'api_key=attacker&b=1'), { ...credentials, query: { api_key: 'k' } });
    expect(url.search).toBe('?b=1&api_key=k');
    // However the caller encoded the name.
    expect(targetUrl(meta('x', undefined, 'api%5Fkey=attacker&api+key=2&b=1'), { ...credentials, query: { api_key: 'k' } }).search).toBe('?api+key=2&b=1&api_key=k');
  });

  it('passes the rest of the caller\'s query on as sent beside injected parameters, not as form encoding would write it again', () => {
    const url = targetUrl(meta('x', undefined, 'q=a%20b&plus=1+2&flag&time=10:30&list=a,b'), { ...credentials, query: { api_key: 'k&v=1' } });
    expect(url.search).toBe('?q=a%20b&plus=1+2&flag&time=10:30&list=a,b&api_key=k%26v%3D1');
  });

  it('takes an override only on the provider or allowed hosts, over https', () => {
    expect(targetUrl(meta('x', 'https://api.example.com/v3'), credentials).toString()).toBe('https://api.example.com/v3/x');
    expect(targetUrl(meta('x', 'https://eu.example.com'), credentials).host).toBe('eu.example.com');
    expect(targetUrl(meta('x', 'https://a.sandbox.example.com'), credentials).host).toBe('a.sandbox.example.com');
    expect(targetUrl(meta('x', 'https://other.example.com:8443'), credentials).host).toBe('other.example.com:8443');
    for (const override of ['https://evil.example', 'https://api.example.com.evil.example', 'https://api.example.com:444', 'http://api.example.com', 'https://other.example.com']) {
      expect(code(() => targetUrl(meta('x', override), credentials))).toBe('upstream_not_allowed');
    }
    const { allowed_hosts: _, ...bare } = credentials;
    expect(code(() => targetUrl(meta('x', 'https://eu.example.com'), bare))).toBe('upstream_not_allowed');
  });
});

describe('targetUrl, one parse', () => {
  /** What the URL setters make of the same base, path and query: the target's meaning before it was built in one parse. */
  const bySetters = (base: string, path: string, query: string) => {
    const url = new URL(base);
    const basePath = url.pathname.replace(/\/+$/, '');
    url.pathname = `${basePath}/${checkedPath(path)}`;
    if (query) url.search = query;
    return url.toString();
  };
  const paths = ['items', 'a b/ü/€', 'a%20b/%C3%BC', 'x\\y', 'a//b/', '"<>`{}|^', "'!$&()*+,;=:@", 'dots.json', '.well-known/x', 'a/b%2Fc', '[x]', '100%25'];
  const queries = ['', 'a=1&b=2', 'q=a b&ü=€', 'x=%41&y="<>"', '=&&=', 'a=1#not-a-fragment'];
  const bases = ['https://api.example.com/v2', 'https://api.example.com/v2/', 'https://api.example.com', 'http://127.0.0.1:8080/base//', 'https://[::1]:8443/v1', 'https://api.example.com/v2?fixed=1'];

  it('builds the URL the setters build, for every path, query and base', () => {
    for (const base of bases) {
      for (const path of paths) {
        for (const query of queries) {
          const url = targetUrl(meta(path, undefined, query), { ...credentials, base_url: base });
          expect([base, path, query, url.toString()]).toEqual([base, path, query, bySetters(base, path, query)]);
        }
      }
    }
  });

  it('checks each base it is given, not only the first', () => {
    expect(targetUrl(meta('x'), credentials).host).toBe('api.example.com');
    expect(code(() => targetUrl(meta('x'), { ...credentials, base_url: 'ftp://api.example.com' }))).toBe('upstream_not_allowed');
    expect(code(() => targetUrl(meta('x'), { ...credentials, base_url: 'https://u:p@api.example.com' }))).toBe('invalid_headers');
    expect(code(() => targetUrl(meta('x'), { ...credentials, base_url: 'not a url' }))).toBe('invalid_headers');
    expect(targetUrl(meta('x'), credentials).toString()).toBe('https://api.example.com/v2/x');
  });
});
