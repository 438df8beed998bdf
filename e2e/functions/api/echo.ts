import { defineAction } from '@latchkey/functions';

/** Calls the upstream through ctx.proxy and returns what it saw. */
export default defineAction({
  name: 'echo',
  description: 'Asks the upstream to echo a path',
  exec: async (ctx, input) => {
    const { word } = (input ?? {}) as { word?: string };
    const response = await ctx.get<{ path: string; query: Record<string, string>; headers: Record<string, string> }>({
      endpoint: `/echo/${word ?? 'hello'}`,
      params: { from: 'function' },
    });
    ctx.log('echoed', { status: response.status });
    return { status: response.status, path: response.data.path, query: response.data.query, key: response.data.headers['x-api-key'] };
  },
});
