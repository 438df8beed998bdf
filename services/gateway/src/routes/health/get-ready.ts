import { z } from 'zod';
import { ping, SERVICE_NAMES } from '@latchkey/contracts';
import { defineRoute } from '../../http/define-route.js';

const PING_TIMEOUT_MS = 1500;

/**
 * Readiness of the whole system: this gateway is connected to NATS and MongoDB, and every service
 * answers its ping within the deadline. 503 with what failed otherwise. What waits for the whole
 * system uses it; a pod's readiness probe uses `/ready/self`, which one service down cannot fail.
 */
export const getReady = defineRoute({
  method: 'get',
  path: '/ready',
  auth: 'public',
  scope: null,
  doc: {
    summary: 'Readiness: NATS and MongoDB connected, every service answering',
    description: 'Of the whole system: `503` while any service does not answer its ping within 1.5 s. The probe for this gateway alone is `/ready/self`.',
    answer: z.object({ status: z.enum(['ready', 'not_ready']), services: z.record(z.string(), z.boolean()) }),
  },
  schemas: {},
  handler: async ({ deps }) => {
    const self = deps.isReady();
    const timeoutMs = Math.min(PING_TIMEOUT_MS, deps.config.REQUEST_TIMEOUT_MS);
    const services = Object.fromEntries(
      await Promise.all(
        SERVICE_NAMES.map(async (service) => {
          if (!self) return [service, false] as const;
          try {
            await deps.bus.request(ping[service], {}, { timeoutMs });
            return [service, true] as const;
          } catch {
            return [service, false] as const;
          }
        }),
      ),
    );
    const ready = self && Object.values(services).every(Boolean);
    return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', services } };
  },
});
