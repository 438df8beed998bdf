import type { ChildProcess } from 'node:child_process';
import { createServer, Socket } from 'node:net';

/** A TCP port on loopback that nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Resolves once something accepts TCP connections on host:port, or rejects after timeoutMs. */
export async function waitForPort(port: number, host = '127.0.0.1', timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = new Socket();
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
      socket.connect(port, host);
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${host}:${port} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Waits for a freshly spawned server to listen; fails at once if it cannot start or exits. */
export async function untilListening(child: ChildProcess, port: number, name: string): Promise<void> {
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (error) => reject(new Error(`cannot start ${name}: ${error.message}`)));
    child.once('exit', (code) => reject(new Error(`${name} exited with code ${code} before listening`)));
  });
  await Promise.race([waitForPort(port), failed]);
}
