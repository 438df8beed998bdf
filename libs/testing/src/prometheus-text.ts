/**
 * A strict parser of the Prometheus text exposition format (0.0.4), for tests that scrape
 * `/metrics`: every line must be a HELP, a TYPE, another comment, blank, or a well-formed sample,
 * else it throws naming the line. Samples are grouped under their family (a histogram's
 * `_bucket`, `_sum` and `_count` under the histogram's name).
 */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface PromFamily {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  help: string;
  samples: PromSample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const SUFFIXES: Record<PromFamily['type'], readonly string[]> = {
  counter: ['', '_total'],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

/**
 * A sample's value. The special values are read in any case, as Prometheus reads them (Go's
 * `ParseFloat`): prom-client writes `Nan`, as the event-loop lag gauges read when no sample was
 * taken since the last scrape.
 */
function parseValue(text: string, line: number): number {
  const special = text.toLowerCase();
  if (special === '+inf' || special === 'inf') return Infinity;
  if (special === '-inf') return -Infinity;
  if (special === 'nan') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`line ${line}: "${text}" is not a sample value`);
  return Number(text);
}

/** Reads `{a="x",b="y"}` from `text` at `start` (the `{`); answers the labels and where they end. */
function parseLabels(text: string, start: number, line: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let at = start + 1;
  for (;;) {
    if (text[at] === '}') return { labels, end: at + 1 };
    const eq = text.indexOf('=', at);
    if (eq < 0) throw new Error(`line ${line}: unterminated labels`);
    const name = text.slice(at, eq).trim();
    if (!LABEL_NAME.test(name)) throw new Error(`line ${line}: bad label name "${name}"`);
    if (name in labels) throw new Error(`line ${line}: label "${name}" repeated`);
    if (text[eq + 1] !== '"') throw new Error(`line ${line}: label value of "${name}" is not quoted`);
    let value = '';
    let index = eq + 2;
    for (;; index++) {
      const char = text[index];
      if (char === undefined) throw new Error(`line ${line}: unterminated label value`);
      if (char === '"') break;
      if (char === '\\') {
        const next = text[++index];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`line ${line}: bad escape in label value`);
      } else value += char;
    }
    labels[name] = value;
    at = index + 1;
    if (text[at] === ',') at += 1;
    else if (text[at] !== '}') throw new Error(`line ${line}: expected , or } after a label`);
  }
}

export function parsePrometheusText(text: string): Map<string, PromFamily> {
  const families = new Map<string, PromFamily>();
  const family = (name: string): PromFamily => {
    let found = families.get(name);
    if (!found) families.set(name, (found = { name, type: 'untyped', help: '', samples: [] }));
    return found;
  };
  /** The family a sample belongs to: its own name, or a typed family it is a suffix of. */
  const owner = (sample: string): PromFamily => {
    for (const candidate of families.values()) {
      if (SUFFIXES[candidate.type].some((suffix) => `${candidate.name}${suffix}` === sample)) return candidate;
    }
    return family(sample);
  };
  text.split('\n').forEach((raw, index) => {
    const line = index + 1;
    const content = raw.trim();
    if (content === '') return;
    if (content.startsWith('#')) {
      const match = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(content);
      if (!match) return; // another comment
      const [, keyword, name, rest = ''] = match;
      if (!METRIC_NAME.test(name!)) throw new Error(`line ${line}: bad metric name "${name}"`);
      if (keyword === 'HELP') family(name!).help = rest.replace(/\\n/g, '\n').replace(/\\\\/g, '\\');
      else {
        if (!TYPES.has(rest)) throw new Error(`line ${line}: unknown type "${rest}"`);
        const target = family(name!);
        if (target.samples.length > 0) throw new Error(`line ${line}: TYPE of ${name} after its samples`);
        target.type = rest as PromFamily['type'];
      }
      return;
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(content);
    if (!nameMatch) throw new Error(`line ${line}: not a sample: ${content}`);
    const name = nameMatch[0];
    let rest = content.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      const parsed = parseLabels(rest, 0, line);
      labels = parsed.labels;
      rest = rest.slice(parsed.end);
    }
    const parts = rest.trim().split(/\s+/);
    if (parts.length < 1 || parts.length > 2 || parts[0] === '') throw new Error(`line ${line}: expected a value (and a timestamp) after ${name}`);
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) throw new Error(`line ${line}: bad timestamp "${parts[1]}"`);
    owner(name).samples.push({ name, labels, value: parseValue(parts[0]!, line) });
  });
  return families;
}

/** The sum of a family's samples named `sample` (all label values), or 0 when it has none. */
export function sampleSum(families: Map<string, PromFamily>, family: string, sample = family, labels: Record<string, string> = {}): number {
  return (families.get(family)?.samples ?? [])
    .filter((one) => one.name === sample && Object.entries(labels).every(([key, value]) => one.labels[key] === value))
    .reduce((sum, one) => sum + one.value, 0);
}

const ID_LIKE = [/conn_/, /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i, /[0-9a-f]{16,}/i, /lk_(sk|cs|pk)_/, /[A-Za-z0-9_-]{32,}/, /[?&=]/];

/**
 * Label values that look like an id (`conn_`, a UUID, 16+ hex digits), a key or token (`lk_sk_`,
 * 32+ base64url characters), a URL with a query, or that contain one of `secrets`: none may be
 * in a scrape. Answers `family{label="value"}` for each one found.
 */
export function idOrSecretLabels(families: Map<string, PromFamily>, secrets: readonly string[] = []): string[] {
  const found = new Set<string>();
  for (const family of families.values()) {
    for (const sample of family.samples) {
      for (const [label, value] of Object.entries(sample.labels)) {
        if (ID_LIKE.some((pattern) => pattern.test(value)) || secrets.some((secret) => secret !== '' && value.includes(secret))) {
          found.add(`${family.name}{${label}="${value}"}`);
        }
      }
    }
  }
  return [...found];
}
