import type { StackProcess } from '../support/stack.js';

/**
 * What a load balancer in front of the gateways does, on the client side: it sends each request
 * to the next gateway whose `/ready/self` (the Helm chart's probe of a gateway pod) answered 200
 * at its last check (every `checkMs`), and tries the next gateway when a connection is refused
 * (nothing was sent, so that is safe). With no gateway ready it tries them all.
 */
export interface Balancer {
  fetch(path: string, init?: RequestInit): Promise<Response>;
  stop(): void;
}

export function startBalancer(gateways: () => readonly StackProcess[], checkMs = 250): Balancer {
  const ready = new Map<string, boolean>();
  let turn = 0;
  let stopped = false;
  const check = async () => {
    while (!stopped) {
      await Promise.all(
        gateways().map(async (gateway) => {
          try {
            const response = await fetch(`${gateway.url}/ready/self`, { signal: AbortSignal.timeout(2000) });
            await response.arrayBuffer();
            ready.set(gateway.url, response.status === 200);
          } catch {
            ready.set(gateway.url, false);
          }
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, checkMs));
    }
  };
  void check();

  return {
    fetch: async (path, init) => {
      const all = gateways().map((gateway) => gateway.url);
      const healthy = all.filter((url) => ready.get(url) !== false);
      const order = (healthy.length > 0 ? healthy : all).slice();
      const start = turn++ % order.length;
      const candidates = [...order.slice(start), ...order.slice(0, start)];
      let lastError: unknown;
      for (const url of candidates) {
        try {
          return await fetch(`${url}${path}`, init);
        } catch (error) {
          lastError = error;
          if (!refused(error)) throw error;
          ready.set(url, false);
        }
      }
      throw lastError;
    },
    stop: () => {
      stopped = true;
    },
  };
}

function refused(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } }).cause;
  return cause?.code === 'ECONNREFUSED';
}
