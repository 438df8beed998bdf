import type { ChildProcess } from 'node:child_process';
import { createServer, Socket } from 'node:net';

const RANGE = 350;
// Below Linux's ephemeral range (32768+), so no outgoing connection holds one of these ports;
// each jest worker draws from its own slice, so parallel test files never pick the same port
// in the moment between choosing it and their server binding it. LATCHKEY_TEST_PORT_SLICE
// (0-7) moves a whole jest run to other slices, for several runs on one machine at once.
const worker = Number(process.env['JEST_WORKER_ID'] ?? 0) % 4;
const run = Number(process.env['LATCHKEY_TEST_PORT_SLICE'] ?? 0) % 8;
const base = 20000 + (run * 4 + worker) * RANGE;
let cursor = Math.floor(Math.random() * RANGE);

/** Whether nothing listens on `port` now (a listener on every interface holds loopback's too). */
export function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A TCP port on loopback that nothing listens on right now, from this worker's own range. */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < RANGE; tries++) {
    const port = base + (cursor++ % RANGE);
    if (await canBind(port)) return port;
  }
  throw new Error(`no free port in ${base}-${base + RANGE - 1}`);
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
