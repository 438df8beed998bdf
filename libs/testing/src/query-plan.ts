/**
 * What a MongoDB-wire server does for a query, from its `explain`, reduced to one verdict: is it
 * an index lookup, or does it read the whole collection? Three shapes are understood:
 * - MongoDB: `queryPlanner.winningPlan`, a tree of stages (`inputStage`, `inputStages`); a
 *   `COLLSCAN` anywhere is a scan, and with `executionStats` the documents examined must not
 *   exceed the documents returned by more than `slack`;
 * - FerretDB on SQLite: `filterPushdown` and `queryPlanner.Plan`, SQLite's `EXPLAIN QUERY PLAN`
 *   lines (`SEARCH t USING INDEX …` or `SCAN t`);
 * - FerretDB on PostgreSQL: `filterPushdown` and `queryPlanner.Plan`, PostgreSQL's JSON plan
 *   (`Node Type` with nested `Plans`; `Seq Scan` or an index / bitmap index scan).
 * On FerretDB a filter that is not pushed down is a scan whatever the plan says: every document
 * goes to FerretDB to be filtered there.
 */
export interface QueryPlanVerdict {
  server: 'mongodb' | 'ferretdb-sqlite' | 'ferretdb-postgresql';
  indexed: boolean;
  /** The plan in a line, for the assertion's message. */
  summary: string;
}

/** A find cursor of the driver. */
export interface Explainable {
  explain(verbosity?: 'queryPlanner' | 'executionStats'): Promise<unknown>;
  toArray(): Promise<unknown[]>;
}

type Plan = Record<string, unknown>;

export function judgePlan(explained: unknown, slack = 2): QueryPlanVerdict {
  const doc = explained as Plan;
  const planner = (doc['queryPlanner'] ?? {}) as Plan;
  if ('filterPushdown' in doc) {
    const pushed = doc['filterPushdown'] === true;
    const plan = planner['Plan'];
    if (Array.isArray(plan)) {
      const lines = plan.map(String);
      const search = lines.some((line) => / SEARCH .* USING (COVERING |PRIMARY KEY|INDEX)/.test(` ${line.replace(/^.*detail=/, '')}`));
      const scan = lines.some((line) => /detail=SCAN /.test(line));
      return { server: 'ferretdb-sqlite', indexed: pushed && search && !scan, summary: `pushdown ${pushed}; ${lines.map((line) => line.replace(/^.*detail=/, '')).join(' | ')}` };
    }
    const nodes = planNodes((plan ?? {}) as Plan, 'Plans');
    const types = nodes.map((node) => String(node['Node Type'] ?? ''));
    const index = types.some((type) => /Index/.test(type));
    const seq = types.includes('Seq Scan');
    return { server: 'ferretdb-postgresql', indexed: pushed && index && !seq, summary: `pushdown ${pushed}; ${types.join(' > ')}` };
  }
  const stages = planNodes((planner['winningPlan'] ?? {}) as Plan, 'inputStages', 'inputStage', 'queryPlan').map((stage) => String(stage['stage'] ?? ''));
  const stats = doc['executionStats'] as Plan | undefined;
  const examined = Number(stats?.['totalDocsExamined'] ?? 0);
  const returned = Number(stats?.['nReturned'] ?? 0);
  const tight = !stats || examined <= slack * Math.max(returned, 1);
  return {
    server: 'mongodb',
    indexed: stages.length > 0 && !stages.includes('COLLSCAN') && tight,
    summary: `${stages.join(' > ')}${stats ? `; examined ${examined}, returned ${returned}` : ''}`,
  };
}

/** Every node of a plan tree, children found under the given keys (one child or a list). */
function planNodes(root: Plan, ...childKeys: string[]): Plan[] {
  const nodes: Plan[] = [root];
  for (const key of childKeys) {
    const child = root[key];
    for (const next of Array.isArray(child) ? child : child && typeof child === 'object' ? [child] : []) nodes.push(...planNodes(next as Plan, ...childKeys));
  }
  return nodes;
}

/**
 * Explains `query()` until it is an index lookup or `waitMs` has passed, and returns the last
 * verdict. The wait is for FerretDB: our launcher indexes a new collection's `_id` lookups
 * within a second of its creation; MongoDB's first answer is final. The query runs before each
 * explain: a SQLite connection learns of a new index when it next runs a statement, and
 * `EXPLAIN` runs none, so it would describe the plan from before the index.
 */
export async function explainUntilIndexed(query: () => Explainable, waitMs = 5000): Promise<QueryPlanVerdict> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    await query().toArray();
    const verdict = judgePlan(await query().explain('executionStats'));
    if (verdict.indexed || verdict.server === 'mongodb' || Date.now() > deadline) return verdict;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
