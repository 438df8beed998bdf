import { createInbox, type Msg, type MsgHdrs, type NatsConnection } from 'nats';
import { PROXY_KEEPALIVE_HEADER, PROXY_KEEPALIVE_MS, PROXY_SUBJECT } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { batchedPublisher } from './batched-publish.js';
import { unavailable } from './create-bus.js';

/**
 * Calls to proxy replicas, with their answers routed through one wildcard inbox per process (no
 * subscription per call). A replica's keepalives re-arm the call's silence timer: silence for a
 * few intervals means the replica died (or none runs), and the caller gets a 503 within
 * seconds rather than at the deadline.
 */
function createProxyExchange(nc: NatsConnection) {
  const prefix = createInbox();
  // A gateway sends many calls per event-loop turn under load: they share socket writes.
  const publisher = batchedPublisher(nc);
  const pending = new Map<string, { resolve(msg: Msg): void; rearm(): void }>();
  nc.subscribe(`${prefix}.*`, {
    callback: (error, msg) => {
      if (error) return;
      const call = pending.get(msg.subject);
      if (!call) return;
      if (msg.headers?.get(PROXY_KEEPALIVE_HEADER) === '1') call.rearm();
      else call.resolve(msg);
    },
  });
  let sequence = 0;
  return (payload: Uint8Array, headers: MsgHdrs, deadlineMs: number): Promise<Msg> =>
    new Promise((resolve, reject) => {
      const inbox = `${prefix}.${(sequence++).toString(36)}`;
      const started = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const finish = () => {
        clearTimeout(timer);
        pending.delete(inbox);
      };
      const rearm = () => {
        clearTimeout(timer);
        const left = deadlineMs - (Date.now() - started);
        timer = setTimeout(() => {
          finish();
          reject(new AppError('service_unavailable', 'No proxy replica answered, or the one handling the call stopped'));
        }, Math.max(0, Math.min(PROXY_KEEPALIVE_MS * 3, left)));
      };
      pending.set(inbox, {
        resolve: (msg) => {
          finish();
          resolve(msg);
        },
        rearm,
      });
      rearm();
      publisher.publish(PROXY_SUBJECT, payload, { reply: inbox, headers }, (error) => {
        finish();
        reject(unavailable(PROXY_SUBJECT, error));
      });
    });
}

const exchanges = new WeakMap<NatsConnection, ReturnType<typeof createProxyExchange>>();

/** Sends one `proxy.request` (metadata in `headers`, body in `payload`) and resolves with the replica's answer. */
export function proxyExchange(nc: NatsConnection, payload: Uint8Array, headers: MsgHdrs, deadlineMs: number): Promise<Msg> {
  let send = exchanges.get(nc);
  if (!send) exchanges.set(nc, (send = createProxyExchange(nc)));
  return send(payload, headers, deadlineMs);
}
