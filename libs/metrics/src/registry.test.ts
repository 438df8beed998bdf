import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { collectProcessMetrics, scrape } from './index.js';

/**
 * How many times this process's main thread has gone to sleep and been woken since it started:
 * an idle event loop that wakes for nothing shows here, counted rather than timed.
 */
function mainThreadWakeUps(): number {
  const status = readFileSync(`/proc/self/task/${process.pid}/status`, 'utf8');
  return Number(/^voluntary_ctxt_switches:\s*(\d+)/m.exec(status)?.[1]);
}

const linux = process.platform === 'linux';

describe('process metrics', () => {
  (linux ? it : it.skip)('keep the event-loop lag without waking an idle process a hundred times a second', async () => {
    collectProcessMetrics();
    // Settle: the first collection's own work is not idling.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const before = mainThreadWakeUps();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const wakeUps = mainThreadWakeUps() - before;
    // prom-client's default samples the loop every 10 ms: some 200 wake-ups in these 2 s, half
    // of what an idle service spent here (1.1 to 1.2 % of a core). A sample every 100 ms is 20.
    expect(wakeUps).toBeLessThan(60);

    const text = await scrape();
    expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds \d/m);
    expect(text).toMatch(/^nodejs_eventloop_lag_max_seconds \d/m);
  });
});
