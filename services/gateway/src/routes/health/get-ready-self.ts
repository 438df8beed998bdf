import { z } from 'zod';
import { defineRoute } from '../../http/define-route.js';

/**
 * Readiness of this gateway alone: connected to NATS and MongoDB, subscribed, not draining.
 * This is the probe that decides whether the pod takes traffic: a service that is down fails
 * only the routes that need it, and must not take every gateway out of rotation with it, as
 * `/ready` (the whole system) would.
 */
export const getReadySelf = defineRoute({
  method: 'get',
  path: '/ready/self',
  auth: 'public',
  scope: null,
  doc: {
    summary: 'Readiness of this gateway: NATS and MongoDB connected, not shutting down',
    description:
      'The probe for a load balancer or an orchestrator: `503` with `"status": "not_ready"` while this gateway starts, lost NATS or MongoDB, or shuts down. Other services are not asked; `/ready` waits for them too.',
    answer: z.object({ status: z.enum(['ready', 'not_ready']) }),
  },
  schemas: {},
  handler: async ({ deps }) => {
    const ready = deps.isReady();
    return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready' } };
  },
});
