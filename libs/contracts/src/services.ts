import { z } from 'zod';
import { defineRequest } from './define.js';

export const SERVICE_NAMES = [
  'gateway',
  'credential-vault',
  'proxy',
  'sync-scheduler',
  'action-runner',
  'webhook-router',
] as const;

export type ServiceName = (typeof SERVICE_NAMES)[number];

export const pingReply = z.object({
  service: z.enum(SERVICE_NAMES),
  instance: z.string(),
  uptime_ms: z.number().int().nonnegative(),
});

function definePing(service: ServiceName) {
  return defineRequest(`${service}.ping`, z.object({}), pingReply);
}

/** `<service>.ping`: answered by every replica's queue group once it is ready. */
export const ping = Object.fromEntries(SERVICE_NAMES.map((service) => [service, definePing(service)])) as {
  [S in ServiceName]: ReturnType<typeof definePing>;
};
