/**
 * Polls `check` every `intervalMs` until it gives something other than undefined, and returns
 * that; throws "timed out waiting for <what>" past `timeoutMs`.
 */
export async function eventually<T>(check: () => T | undefined | Promise<T | undefined>, timeoutMs: number, what: string, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
