/**
 * How long the client waits for an answer, by default. Each is longer than the gateway itself
 * may take to answer (with the server's default settings), so that the gateway's answer arrives,
 * its own timeout error included, rather than the client giving up on a call that still runs:
 * a client-side timeout cannot say how the call ended.
 */

/** Most calls: the gateway answers them within its request timeout. */
export const CALL_TIMEOUT_MS = 30_000;

/** What is added to the server's longest wait, for the answer to travel back. */
const MARGIN_MS = 5_000;

/** `POST /action/trigger` waits for the run: `FUNCTION_TIMEOUT_MS` (60 s by default) + 10 s. */
export const ACTION_TIMEOUT_MS = 60_000 + 10_000 + MARGIN_MS;

/**
 * `/proxy` with `Retries: n` waits up to (`PROXY_TIMEOUT_MS` (30 s by default) + 10 s) × (n + 1)
 * + 5 s: every attempt may take the upstream timeout, and each retry waits for its back-off.
 */
export function proxyTimeoutMs(retries: number): number {
  return (30_000 + 10_000) * (retries + 1) + 5_000 + MARGIN_MS;
}
