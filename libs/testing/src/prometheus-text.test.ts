import { describe, expect, it } from '@jest/globals';
import { idOrSecretLabels, parsePrometheusText, sampleSum } from './prometheus-text.js';

describe('parsePrometheusText', () => {
  it('groups counters, gauges and histograms with their samples and labels', () => {
    const families = parsePrometheusText(
      [
        '# HELP requests_total Requests.',
        '# TYPE requests_total counter',
        'requests_total{code="a",path="x\\"y\\\\z"} 3',
        'requests_total{code="b"} 4.5 1700000000000',
        '# TYPE depth gauge',
        'depth 7',
        '# TYPE took_seconds histogram',
        'took_seconds_bucket{le="0.1"} 1',
        'took_seconds_bucket{le="+Inf"} 2',
        'took_seconds_sum 0.3',
        'took_seconds_count 2',
        '',
      ].join('\n'),
    );
    expect(families.get('requests_total')).toMatchObject({ type: 'counter', help: 'Requests.' });
    expect(families.get('requests_total')!.samples[0]!.labels).toEqual({ code: 'a', path: 'x"y\\z' });
    expect(sampleSum(families, 'requests_total')).toBe(7.5);
    expect(sampleSum(families, 'depth')).toBe(7);
    expect(sampleSum(families, 'took_seconds', 'took_seconds_count')).toBe(2);
    expect(families.get('took_seconds')!.samples).toHaveLength(4);
  });

  it('reads the special values in any case, as Prometheus does (prom-client writes Nan)', () => {
    const families = parsePrometheusText(['# TYPE lag gauge', 'lag{at="a"} Nan', 'lag{at="b"} NaN', 'lag{at="c"} +Inf', 'lag{at="d"} -inf'].join('\n'));
    expect(families.get('lag')!.samples.map((sample) => sample.value)).toEqual([NaN, NaN, Infinity, -Infinity]);
  });

  it.each([
    ['a value that is not a number', 'x 1,5'],
    ['an unquoted label value', 'x{a=b} 1'],
    ['an unterminated label set', 'x{a="b" 1'],
    ['a bad label name', 'x{1a="b"} 1'],
    ['an unknown type', '# TYPE x countr'],
    ['a repeated label', 'x{a="1",a="2"} 1'],
  ])('refuses %s', (_what, text) => {
    expect(() => parsePrometheusText(text)).toThrow(/line 1/);
  });
});

describe('idOrSecretLabels', () => {
  it('names label values that look like ids, keys or given secrets, and passes bounded ones', () => {
    const families = parsePrometheusText(
      [
        'a{route="/connections/:connectionId",code="unknown_api_key"} 1',
        'a{id="conn_abc"} 1',
        'a{id="6f1c2a0e-8c1b-4f7e-9d2a-3b4c5d6e7f80"} 1',
        'a{id="deadbeefdeadbeef00"} 1',
        'a{key="lk_sk_x"} 1',
        'a{url="/items?page=2"} 1',
        'a{name="my-hush-value"} 1',
      ].join('\n'),
    );
    expect(idOrSecretLabels(families, ['hush'])).toEqual([
      'a{id="conn_abc"}',
      'a{id="6f1c2a0e-8c1b-4f7e-9d2a-3b4c5d6e7f80"}',
      'a{id="deadbeefdeadbeef00"}',
      'a{key="lk_sk_x"}',
      'a{url="/items?page=2"}',
      'a{name="my-hush-value"}',
    ]);
  });
});
