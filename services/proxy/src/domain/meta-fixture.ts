import type { ProxyRequestMeta } from '@latchkey/contracts';

/**
 * A proxied call's meta for the proxy's tests: a GET of `path` with an inline body, no query,
 * header or retry, in one environment, integration and connection; `fields` override any of it.
 */
export function proxyMetaFixture(path: string, fields: Partial<ProxyRequestMeta> = {}): ProxyRequestMeta {
  return {
    environment_id: 'env_0123456789abcdef0123',
    key_id: 'key_1',
    connection_id: 'conn-1',
    provider_config_key: 'crm',
    method: 'GET',
    path,
    query: '',
    headers: [],
    retries: 0,
    retry_on: [],
    body: 'inline',
    ...fields,
  };
}
