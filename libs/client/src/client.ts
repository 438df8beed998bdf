import got, { type Got, RequestError } from 'got';
import { LatchkeyError, errorFromResponse } from './errors.js';

export interface LatchkeyOptions {
  /** The gateway's base URL. Default `http://localhost:3003`. */
  host?: string;
  /** The environment's secret key. */
  apiKey?: string;
  /** @deprecated Use `apiKey`. */
  secretKey?: string;
  /** Per-request timeout. Default 30 s. */
  timeoutMs?: number;
  /** How many times a 429 is retried after waiting its `Retry-After`. Default 2; 0 turns it off. */
  rateLimitRetries?: number;
}

export interface EnvironmentVariable {
  name: string;
  value: string;
}

type Query = Record<string, string | number | boolean | undefined>;

interface CallOptions {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
}

const MAX_RETRY_AFTER_S = 60;

/**
 * The Latchkey client. One instance per environment key; safe to share across requests.
 *
 * ```ts
 * const latchkey = new Latchkey({ host: 'https://latchkey.internal', apiKey: process.env.LATCHKEY_SECRET_KEY });
 * const variables = await latchkey.getEnvironmentVariables();
 * ```
 */
export class Latchkey {
  readonly host: string;
  private readonly http: Got;
  private readonly rateLimitRetries: number;

  constructor(options: LatchkeyOptions) {
    const apiKey = options.apiKey ?? options.secretKey;
    if (!apiKey) throw new TypeError('Latchkey: apiKey is required');
    this.host = (options.host ?? 'http://localhost:3003').replace(/\/+$/, '');
    this.rateLimitRetries = options.rateLimitRetries ?? 2;
    this.http = got.extend({
      prefixUrl: this.host,
      headers: { authorization: `Bearer ${apiKey}`, 'user-agent': 'latchkey-node' },
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: { request: options.timeoutMs ?? 30_000 },
      responseType: 'text',
    });
  }

  /** The environment's variables. Scope `environment:variables:read`. */
  async getEnvironmentVariables(): Promise<EnvironmentVariable[]> {
    return this.call<EnvironmentVariable[]>('GET', 'environment-variables');
  }

  /** Sends one request to the API; resolves with the parsed JSON body or rejects with LatchkeyError. */
  protected async call<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, options: CallOptions = {}): Promise<T> {
    const searchParams = Object.fromEntries(
      Object.entries(options.query ?? {}).filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined),
    );
    for (let attempt = 0; ; attempt++) {
      let response;
      try {
        response = await this.http(path.replace(/^\//, ''), {
          method,
          searchParams,
          ...(options.headers ? { headers: options.headers } : {}),
          ...(options.body === undefined ? {} : { json: options.body }),
        });
      } catch (error) {
        const code = error instanceof RequestError && error.code ? error.code : 'network_error';
        throw new LatchkeyError({ status: 0, code, message: `Cannot reach Latchkey at ${this.host}: ${(error as Error).message}` });
      }
      const body: unknown = response.body ? safeJson(response.body) : undefined;
      if (response.statusCode < 400) return body as T;
      const error = errorFromResponse(response.statusCode, body, response.headers['retry-after']);
      if (response.statusCode === 429 && attempt < this.rateLimitRetries && error.retryAfter !== undefined && error.retryAfter <= MAX_RETRY_AFTER_S) {
        await new Promise((resolve) => setTimeout(resolve, error.retryAfter! * 1000));
        continue;
      }
      throw error;
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
