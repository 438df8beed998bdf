import { connect, createServer, type Socket } from 'node:net';
import { freePort } from './ports.js';

export interface TestTcpRelay {
  /** The loopback port that forwards to the target. */
  port: number;
  /** From now on, what clients send is kept back (as a paused process sends nothing). */
  hold(): void;
  /** Sends what was kept back, and forwards again. */
  release(): void;
  /** From now on, what the target sends is kept back (a server too starved to answer). */
  holdReplies(): void;
  /** Sends the target's replies kept back, and forwards them again. */
  releaseReplies(): void;
  /** The target goes away: every connection is dropped and new ones are refused until `restore`. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

/**
 * A TCP relay on loopback to a real server (a database, a broker), for tests that need the
 * network between a service and that server to pause or fail: a fault of the wire, not a stub.
 */
export async function startTcpRelay(target: { host?: string; port: number }): Promise<TestTcpRelay> {
  let holding = false;
  let holdingReplies = false;
  let cutOff = false;
  const held: Array<() => void> = [];
  const heldReplies: Array<() => void> = [];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    if (cutOff) {
      client.destroy();
      return;
    }
    const upstream = connect(target.port, target.host ?? '127.0.0.1');
    sockets.add(client).add(upstream);
    upstream.on('data', (chunk: Buffer) => {
      const send = () => client.write(chunk);
      if (holdingReplies) heldReplies.push(send);
      else send();
    });
    client.on('data', (chunk: Buffer) => {
      const send = () => upstream.write(chunk);
      if (holding) held.push(send);
      else send();
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    hold: () => {
      holding = true;
    },
    release: () => {
      holding = false;
      for (const send of held.splice(0)) send();
    },
    holdReplies: () => {
      holdingReplies = true;
    },
    releaseReplies: () => {
      holdingReplies = false;
      for (const send of heldReplies.splice(0)) send();
    },
    cut: () => {
      cutOff = true;
      held.length = 0;
      heldReplies.length = 0;
      for (const socket of sockets) socket.destroy();
    },
    restore: () => {
      cutOff = false;
    },
    close: async () => {
      cutOff = true;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
