import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import { METRICS, collectProcessMetrics, registry } from '@latchkey/metrics';

/**
 * The ready-made dashboard and alert rules, and the list in docs/operations.md, name only
 * metrics the services export: the catalog in libs/metrics, plus Node's process metrics.
 */

const read = (path: string) => readFileSync(new URL(path, import.meta.url), 'utf8');

/** Exported names: the catalog's, with a histogram's series, and the default process metrics. */
async function exportedNames(): Promise<Set<string>> {
  collectProcessMetrics();
  const names = new Set<string>((await registry.getMetricsAsJSON()).map((metric) => metric.name));
  for (const [name, spec] of Object.entries(METRICS)) {
    names.add(name);
    if (spec.kind === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
  }
  return names;
}

/** The metric names a PromQL expression uses (identifiers with our prefixes, not label names or functions). */
function metricsIn(expression: string): string[] {
  const withoutStrings = expression.replace(/"[^"]*"/g, '""');
  const withoutMatchers = withoutStrings.replace(/\{[^}]*\}/g, '{}');
  const withoutGrouping = withoutMatchers.replace(/\b(by|without)\s*\([^)]*\)/g, '');
  return [...withoutGrouping.matchAll(/\b(latchkey_|http_|messaging_|process_|nodejs_)[a-zA-Z0-9_:]*/g)].map((match) => match[0]);
}

interface Panel {
  panels?: Panel[];
  targets?: Array<{ expr: string }>;
}

describe('metrics in deploy/ and docs/', () => {
  it('the dashboard queries only exported metrics', async () => {
    const exported = await exportedNames();
    const dashboard = JSON.parse(read('grafana/latchkey-dashboard.json')) as { panels: Panel[] };
    const expressions = dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]).flatMap((panel) => (panel.targets ?? []).map((target) => target.expr));
    expect(expressions.length).toBeGreaterThan(10);
    const used = expressions.flatMap(metricsIn);
    expect(used.filter((name) => !exported.has(name))).toEqual([]);
    // Every Latchkey metric has a panel.
    const latchkey = Object.keys(METRICS).filter((name) => name.startsWith('latchkey_'));
    expect(latchkey.filter((name) => !used.some((one) => one === name || one.startsWith(`${name}_`)))).toEqual([]);
  });

  it('the alert rules use only exported metrics', async () => {
    const exported = await exportedNames();
    const rules = parse(read('prometheus/alerts.yml')) as { groups: Array<{ name: string; rules: Array<{ alert: string; expr: string }> }> };
    const alerts = rules.groups.flatMap((group) => group.rules);
    expect(alerts.map((rule) => rule.alert)).toEqual(
      expect.arrayContaining(['LatchkeyWebhookBacklogGrowing', 'LatchkeyWebhooksParkedGrowing', 'LatchkeyRefreshFailures', 'LatchkeyProxyUpstream5xx', 'LatchkeySandboxTimeouts']),
    );
    for (const rule of alerts) {
      const used = metricsIn(rule.expr);
      expect({ alert: rule.alert, used: used.length > 0, unknown: used.filter((name) => !exported.has(name)) }).toEqual({ alert: rule.alert, used: true, unknown: [] });
    }
  });

  it('the chart\'s README names only exported metrics', async () => {
    const exported = await exportedNames();
    // `latchkey_<service>`, `-` written `_`, also names each service's database.
    const databases = new Set(['gateway', 'credential-vault', 'sync-scheduler', 'action-runner', 'webhook-router'].map((name) => `latchkey_${name.replace(/-/g, '_')}`));
    const readme = read('helm/latchkey/README.md');
    const named = [...new Set([...readme.matchAll(/\b(latchkey|messaging|http_server|process|nodejs)_[a-z0-9_]+/g)].map((match) => match[0]))];
    const labels = new Set<string>(Object.values(METRICS).flatMap((spec) => [...spec.labels]));
    const metrics = named.filter((name) => !databases.has(name) && !labels.has(name));
    // The autoscaling example reads one.
    expect(metrics.length).toBeGreaterThan(0);
    expect(metrics.filter((name) => !exported.has(name))).toEqual([]);
  });

  it('docs/operations.md names every alert of the rules file, and no other', () => {
    const rules = parse(read('prometheus/alerts.yml')) as { groups: Array<{ rules: Array<{ alert: string }> }> };
    const alerts = rules.groups.flatMap((group) => group.rules.map((rule) => rule.alert));
    const named = [...new Set([...read('../docs/operations.md').matchAll(/`(Latchkey[A-Za-z0-9]+)`/g)].map((match) => match[1]!))];
    expect(named.sort()).toEqual([...alerts].sort());
  });

  it('docs/operations.md lists every metric of the catalog with its type and labels, and no other', () => {
    const rows = read('../docs/operations.md')
      .split('\n')
      .map((line) => /^\| `([a-z_]+)` \| (\w+) \| ([^|]*) \|/.exec(line))
      .filter((match): match is RegExpExecArray => match !== null);
    const documented = Object.fromEntries(rows.map(([, name, kind, labels]) => [name, { kind, labels: [...labels!.matchAll(/`([a-z_]+)`/g)].map((label) => label[1]) }]));
    const catalog = Object.fromEntries(Object.entries(METRICS).map(([name, spec]) => [name, { kind: spec.kind, labels: [...spec.labels] }]));
    expect(documented).toEqual(catalog);
  });
});
