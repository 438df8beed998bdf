import type { ProxyCredentials, ProxyRequestMeta } from '@latchkey/contracts';
import { oauth1Header } from '@latchkey/oauth1';
import type { UpstreamCall } from '../upstream/call-upstream.js';
import { upstreamHeaders } from './header-policy.js';
import { targetUrl } from './upstream-target.js';

/**
 * The call to send: where (`targetUrl`: the checked path, and an override only on an allowed
 * host) and with which headers (`upstreamHeaders`: the one header policy, whoever the caller).
 */
export function buildCall(meta: ProxyRequestMeta, credentials: ProxyCredentials, body: UpstreamCall['body']): UpstreamCall {
  const url = targetUrl(meta, credentials);
  const injected = Object.entries(credentials.headers);
  const names = new Set(injected.map(([name]) => name.toLowerCase()));
  const oauth1 = credentials.oauth1;
  // The signature is an injected Authorization too, added to each attempt: no caller's may go beside it.
  if (oauth1) names.add('authorization');
  const explicit = meta.explicit_headers;
  const headers = upstreamHeaders(meta.headers, injected, names, explicit);
  // A caller's own Authorization or Cookie is a credential as well: like the injected ones, and
  // as curl and browsers do, it is not sent on to another origin a redirect names.
  if (explicit !== undefined) {
    names.add('authorization');
    names.add('cookie');
  }
  let sign: UpstreamCall['sign'];
  if (oauth1) {
    const form = headers.find(([name]) => name.toLowerCase() === 'content-type')?.[1]?.startsWith('application/x-www-form-urlencoded');
    const bodyParams = form && body instanceof Uint8Array ? formParams(Buffer.from(body).toString('utf8')) : undefined;
    sign = (method, target) => [
      'Authorization',
      oauth1Header({
        method,
        url: target,
        consumerKey: oauth1.consumer_key,
        consumerSecret: oauth1.consumer_secret,
        token: oauth1.token,
        tokenSecret: oauth1.token_secret,
        signatureMethod: oauth1.signature_method,
        realm: oauth1.realm,
        ...(bodyParams && method === meta.method ? { bodyParams } : {}),
      }),
    ];
  }
  return { method: meta.method, url, headers, body, secretHeaders: names, ...(sign ? { sign } : {}) };
}

/** Form fields with repeated names kept, as OAuth 1 signs them. */
function formParams(text: string): Record<string, string[]> {
  const params: Record<string, string[]> = {};
  for (const [name, value] of new URLSearchParams(text)) (params[name] ??= []).push(value);
  return params;
}
