import got from 'got';
import { AppError } from '@latchkey/errors';

/**
 * One call to a provider's token endpoint, the only way this service reaches one: no redirect is
 * followed (it would carry client secrets or credentials wherever the answer points), no retry,
 * a deadline, and a network failure reported by its code alone (messages can quote the URL).
 */
export async function callTokenEndpoint(
  url: string,
  options: { method?: 'GET' | 'POST' | 'PUT'; headers: Record<string, string>; form?: Record<string, string>; json?: unknown; timeoutMs: number },
): Promise<{ statusCode: number; body: string }> {
  try {
    const response = await got(url, {
      method: options.method ?? 'POST',
      headers: options.headers,
      ...(options.form === undefined ? {} : { form: options.form }),
      ...(options.json === undefined ? {} : { json: options.json }),
      followRedirect: false,
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: { request: options.timeoutMs },
      responseType: 'text',
    });
    return { statusCode: response.statusCode, body: response.body };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw new AppError('refresh_token_external_error', "The provider's token endpoint could not be reached", {
      payload: { error: 'unreachable', ...(typeof code === 'string' ? { reason: code } : {}) },
    });
  }
}
