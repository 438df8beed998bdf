/**
 * A circuit breaker per customer URL, per replica: after `threshold` consecutive failures the
 * URL gets no attempts for `cooldownMs` (its deliveries wait instead, no attempt spent); then
 * one delivery probes it: an answer closes the circuit, failure opens it again, and a probe
 * that never reached the URL lets the next delivery probe.
 */
export function createCircuitBreakers(options: { threshold: number; cooldownMs: number; maxUrls?: number; now?: () => number }) {
  const now = options.now ?? Date.now;
  const maxUrls = options.maxUrls ?? 10_000;
  const circuits = new Map<string, { failures: number; openUntil: number; probing: boolean }>();
  return {
    /** 0 when an attempt may go now; else how long to wait. */
    waitFor(url: string): number {
      const circuit = circuits.get(url);
      if (!circuit || circuit.failures < options.threshold) return 0;
      const left = circuit.openUntil - now();
      if (left > 0) return left;
      if (circuit.probing) return Math.max(1000, options.cooldownMs / 10);
      circuit.probing = true;
      return 0;
    },
    /** The URL answered: a success, or an answer final for its webhook (a 4xx). It is up. */
    answered(url: string): void {
      circuits.delete(url);
    },
    /** An attempt that tells nothing of the URL (refused before a socket opened, or never sent) ended. */
    settled(url: string): void {
      const circuit = circuits.get(url);
      if (circuit) circuit.probing = false;
    },
    /** How many URLs' circuits are in each state that is not closed (for metrics). */
    states(): { failing: number; open: number; halfOpen: number } {
      const counts = { failing: 0, open: 0, halfOpen: 0 };
      const at = now();
      for (const circuit of circuits.values()) {
        if (circuit.failures < options.threshold) counts.failing += 1;
        else if (circuit.openUntil > at) counts.open += 1;
        else counts.halfOpen += 1;
      }
      return counts;
    },
    failed(url: string): void {
      if (!circuits.has(url) && circuits.size >= maxUrls) circuits.clear();
      const circuit = circuits.get(url) ?? { failures: 0, openUntil: 0, probing: false };
      circuit.failures += 1;
      circuit.probing = false;
      if (circuit.failures >= options.threshold) circuit.openUntil = now() + options.cooldownMs;
      circuits.set(url, circuit);
    },
  };
}

export type CircuitBreakers = ReturnType<typeof createCircuitBreakers>;
