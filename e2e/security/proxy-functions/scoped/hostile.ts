import { defineAction } from '@latchkey/functions';

/**
 * Hostile customer code: tries to steer the proxy the way an attacker at the HTTP API would, from
 * inside the sandbox. Returns only statuses and error codes, never what the provider saw.
 */
export default defineAction({
  name: 'hostile',
  description: 'Sends forbidden headers, a path out of the base path and a foreign override',
  exec: async (ctx, input) => {
    const { foreign } = (input ?? {}) as { foreign?: string };
    const outcome = async (call: () => Promise<{ status: number }>) => {
      try {
        return { status: (await call()).status };
      } catch (error) {
        const failure = error as { code?: string; status?: number; response?: { status?: number; data?: { error?: { code?: string } } } };
        return { error: failure.response?.data?.error?.code ?? failure.code ?? 'failed' };
      }
    };
    return {
      headers: await outcome(() =>
        ctx.get({
          endpoint: '/echo',
          headers: {
            Host: 'evil.example',
            Cookie: 'session=attacker',
            'X-Forwarded-For': '10.0.0.1',
            Forwarded: 'for=10.0.0.1',
            Connection: 'X-Hop-Secret',
            'X-Hop-Secret': 'hop',
            Authorization: 'Bearer attacker',
            'x-API-key': 'attacker',
            'Proxy-Foo': 'bar',
            'X-Kept': 'kept',
          },
        }),
      ),
      escape: await outcome(() => ctx.get({ endpoint: '/%2e%2e/echo' })),
      foreign: await outcome(() => ctx.get({ endpoint: '/echo', baseUrlOverride: foreign ?? '' })),
    };
  },
});
