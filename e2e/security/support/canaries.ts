import { randomBytes } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import type { ServiceName } from '@latchkey/contracts';
import { startStack, type Stack, type StackOptions } from '../../support/stack.js';

/**
 * The security suite's witness. Every secret an attack aims at is a canary: a random string
 * made here and planted by the test (in credentials, client secrets, signing keys, variables)
 * or by the harness (in every process's environment). The witness reads everything the stack
 * prints and every message that crosses NATS, and `leaks()` names each place a canary showed
 * up where no secret may travel.
 *
 * Secrets legitimately cross NATS on a few subjects: a customer importing credentials or an
 * integration's client secret (the request), and the answers that return plaintext to the
 * services and customers entitled to it (the reply). Those are listed once below; anywhere
 * else a canary is a leak. Logs may never hold one.
 */
const REQUESTS_CARRYING_SECRETS = [
  'vault.connections.create',
  'vault.integrations.create',
  'vault.integrations.update',
  'vault.sessions.connect',
  'vault.sessions.client_credentials',
  'vault.keys.rotate',
];
const REPLIES_CARRYING_SECRETS = [
  // An import answers the full connection: what its caller has just sent.
  'vault.connections.create',
  'vault.credentials.get',
  'vault.connections.get',
  'vault.integrations.get',
  'vault.integrations.list',
  'gateway.environment.get',
  'gateway.environment.signing_keys',
];

export interface Leak {
  canary: string;
  /** `log <service>` or `nats <subject>`. */
  where: string;
}

export interface SecurityStack {
  stack: Stack;
  /** Planted in the environment of every process of the stack. */
  envCanary: string;
  /** A fresh canary for a secret the test plants; the label only helps read a failure. */
  canary(label: string): string;
  /** Every place a canary appeared where it must not, so far. */
  leaks(): Leak[];
  /** Asserts the answer's text holds no canary. */
  assertClean(text: string, what: string): void;
  dispose(): Promise<void>;
}

function matchesSubject(list: readonly string[], subject: string): boolean {
  return list.some((name) => subject === name || subject.startsWith(`${name}.`));
}

export async function startSecurityStack(options: StackOptions = {}): Promise<SecurityStack> {
  const canaries = new Map<string, string>();
  const make = (label: string) => {
    const value = `lkcanary${randomBytes(12).toString('hex')}`;
    canaries.set(value, label);
    return value;
  };
  const envCanary = make('environment');
  const leaks: Leak[] = [];
  const scan = (text: string, where: string) => {
    for (const canary of canaries.keys()) if (text.includes(canary)) leaks.push({ canary: `${canaries.get(canary)} (${canary})`, where });
  };

  const onOutput = (service: ServiceName, text: string) => {
    scan(text, `log ${service}`);
    options.onOutput?.(service, text);
  };
  const stack = await startStack({
    ...options,
    env: { LATCHKEY_SECURITY_CANARY: envCanary, ...options.env },
    onOutput,
  });

  let snoop: NatsConnection;
  try {
    // The test servers' observer: the one identity allowed to see every subject.
    snoop = await stack.connectNats('observer');
  } catch (error) {
    await stack.dispose();
    throw error;
  }
  const exemptReplies = new Set<string>();
  // The request each pending reply answers, to name a leak in a reply by what was asked.
  const replyTo = new Map<string, string>();
  const decoder = new TextDecoder();
  snoop.subscribe('>', {
    callback: (error, msg) => {
      if (error) return;
      if (exemptReplies.delete(msg.subject)) return;
      const asked = replyTo.get(msg.subject);
      if (asked !== undefined) replyTo.delete(msg.subject);
      if (msg.reply) {
        if (matchesSubject(REPLIES_CARRYING_SECRETS, msg.subject)) exemptReplies.add(msg.reply);
        else if (replyTo.size < 10_000) replyTo.set(msg.reply, msg.subject);
      }
      if (matchesSubject(REQUESTS_CARRYING_SECRETS, msg.subject)) return;
      let text = decoder.decode(msg.data);
      if (msg.headers) for (const [name, values] of msg.headers) text += `\n${name}: ${values.join(',')}`;
      scan(text, asked === undefined ? `nats ${msg.subject}` : `nats reply to ${asked}`);
    },
  });
  // The subscription must be live on the server before the test starts planting.
  await snoop.flush();

  return {
    stack,
    envCanary,
    canary: make,
    leaks: () => [...leaks],
    assertClean(text, what) {
      const found = [...canaries.keys()].filter((canary) => text.includes(canary)).map((canary) => canaries.get(canary));
      if (found.length > 0) throw new Error(`${what} holds the canary of ${found.join(', ')}`);
    },
    async dispose() {
      await snoop.drain().catch(() => undefined);
      await stack.dispose();
    },
  };
}
