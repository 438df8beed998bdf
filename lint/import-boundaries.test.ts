import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { ESLint } from 'eslint';
import { importBoundaries } from './import-boundaries.js';

/** A small tree shaped like ours, with one bad import of each kind and one good file. */
const TREE: Record<string, string> = {
  'libs/ledger/package.json': JSON.stringify({ name: '@fixture/ledger' }),
  'libs/ledger/src/index.ts': `export { total } from './sum.js';\n`,
  'libs/ledger/src/sum.ts': `import { round } from './round.js';\nexport const total = (values: number[]) => round(values.reduce((a, b) => a + b, 0));\n`,
  'libs/ledger/src/round.ts': `import { total } from './sum.js';\nexport const round = (value: number) => Math.round(value);\nexport const again = total;\n`,
  'libs/ledger/src/audit.ts': `import { billing } from '@fixture/billing';\nexport const audited = billing;\n`,
  'packages/sdk/package.json': JSON.stringify({ name: '@fixture/sdk' }),
  'packages/sdk/src/index.ts': `import { total } from '@fixture/ledger';\nexport const sum = total;\n`,
  'packages/sdk/src/index.test.ts': `import { total } from '@fixture/ledger';\nexport const check = total;\n`,
  'services/billing/package.json': JSON.stringify({ name: '@fixture/billing' }),
  'services/billing/src/index.ts': `import { total } from '@fixture/ledger';\nexport const billing = total;\n`,
  'services/billing/src/invoices.ts': `import { shipping } from '@fixture/shipping';\nexport const invoices = shipping;\n`,
  'services/billing/src/sdk.ts': `import { sum } from '@fixture/sdk/dist/index.js';\nexport const viaSdk = sum;\n`,
  'services/billing/src/reach.ts': `import { shipping } from '../../shipping/src/index.js';\nexport const reached = shipping;\n`,
  'services/shipping/package.json': JSON.stringify({ name: '@fixture/shipping' }),
  'services/shipping/src/index.ts': `export const shipping = 1;\n`,
};

let root: string;
let problems: Array<{ file: string; line: number; rule: string | null }>;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'latchkey-lint-'));
  for (const [path, text] of Object.entries(TREE)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  const eslint = new ESLint({ cwd: root, overrideConfigFile: true, overrideConfig: importBoundaries(root) });
  const results = await eslint.lintFiles(['.']);
  problems = results.flatMap((result) =>
    result.messages.map((message) => ({ file: relative(root, result.filePath), line: message.line, rule: message.ruleId })),
  );
}, 60_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

const at = (file: string) => problems.filter((problem) => problem.file === file).map((problem) => problem.rule);

describe('the import-boundary lint', () => {
  it('fails a service that imports another service', () => {
    expect(at('services/billing/src/invoices.ts')).toEqual(['no-restricted-imports']);
  });

  it('fails a service that imports a published package, even a path inside it', () => {
    expect(at('services/billing/src/sdk.ts')).toEqual(['no-restricted-imports']);
  });

  it('fails a relative import into another workspace', () => {
    expect(at('services/billing/src/reach.ts')).toEqual(['import-x/no-relative-packages']);
  });

  it('fails a published package that imports an internal library, but not its tests', () => {
    expect(at('packages/sdk/src/index.ts')).toEqual(['no-restricted-imports']);
    expect(at('packages/sdk/src/index.test.ts')).toEqual([]);
  });

  it('fails a library that imports a service', () => {
    expect(at('libs/ledger/src/audit.ts')).toEqual(['no-restricted-imports']);
  });

  it('fails both ends of an import cycle', () => {
    expect(at('libs/ledger/src/sum.ts')).toEqual(['import-x/no-cycle']);
    expect(at('libs/ledger/src/round.ts')).toEqual(['import-x/no-cycle']);
  });

  it('passes a service that imports a library, and nothing else is reported', () => {
    expect(at('services/billing/src/index.ts')).toEqual([]);
    expect(problems).toHaveLength(7);
  });
});
