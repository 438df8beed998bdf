import { describe, expect, it } from '@jest/globals';
import { Histogram as PromHistogram, Registry } from 'prom-client';
import { Histogram } from './histogram.js';

const BOUNDS = [0.001, 0.01, 0.1, 1];
const OBSERVED = [0.0005, 0.001, 0.002, 0.05, 0.5, 0.5, 3, 0];

describe('Histogram', () => {
  it("scrapes as prom-client's own histogram does, for the same observations", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const fast = new Histogram('took_seconds', 'How long it took.', ['route', 'status'], BOUNDS, ours);
    const reference = new PromHistogram({ name: 'took_seconds', help: 'How long it took.', labelNames: ['route', 'status'], buckets: BOUNDS, registers: [theirs] });
    const child = fast.labels({ route: '/a', status: 200 });
    for (const value of OBSERVED) {
      child.observe(value);
      reference.labels({ route: '/a', status: '200' }).observe(value);
    }
    fast.observe({ route: '/b' }, 0.02);
    reference.observe({ route: '/b' }, 0.02);

    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('observes without labels', async () => {
    const registry = new Registry();
    const fast = new Histogram('wait_seconds', 'Waits.', [], BOUNDS, registry);
    fast.observe(0.2);
    fast.observe(2);
    const text = await registry.metrics();
    expect(text).toContain('wait_seconds_bucket{le="1"} 1');
    expect(text).toContain('wait_seconds_bucket{le="+Inf"} 2');
    expect(text).toContain('wait_seconds_sum 2.2');
    expect(text).toContain('wait_seconds_count 2');
  });

  it('refuses a label it does not have and a value that is not a number', () => {
    const fast = new Histogram('refusing_seconds', 'Refuses.', ['route'], BOUNDS, new Registry());
    expect(() => fast.labels({ route: '/a', id: 'conn_1' } as never)).toThrow('no label id');
    expect(() => fast.labels({ route: '/a' }).observe(Number.NaN)).toThrow(TypeError);
  });

  it('zeroes its series on reset, and a child held since goes on counting', async () => {
    const registry = new Registry();
    const fast = new Histogram('reset_seconds', 'Resets.', ['route'], BOUNDS, registry);
    const held = fast.labels({ route: '/a' });
    held.observe(0.5);
    registry.resetMetrics();
    expect(await registry.metrics()).toContain('reset_seconds_count{route="/a"} 0');
    held.observe(0.05);
    const text = await registry.metrics();
    expect(text).toContain('reset_seconds_count{route="/a"} 1');
    expect(text).toContain('reset_seconds_bucket{le="0.1",route="/a"} 1');
  });
});
