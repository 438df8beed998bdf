import { describe, expect, it } from '@jest/globals';
import { judgePlan } from './query-plan.js';

// Plans as each server printed them for `{_id: 'k5'}` and for a filter it could not push down.
describe('judgePlan', () => {
  it('reads FerretDB on SQLite: a pushed-down filter searched through an index, or a scan', () => {
    const search = { filterPushdown: true, queryPlanner: { Plan: ['id=3 parent=0 notused=0 detail=SEARCH r_f70c4715 USING INDEX r_f70c4715__id_lookup (<expr>=?)'] } };
    expect(judgePlan(search)).toMatchObject({ server: 'ferretdb-sqlite', indexed: true });
    const pushedButScanned = { filterPushdown: true, queryPlanner: { Plan: ['id=2 parent=0 notused=0 detail=SCAN r_f70c4715'] } };
    expect(judgePlan(pushedButScanned).indexed).toBe(false);
    const notPushed = { filterPushdown: false, queryPlanner: { Plan: ['id=3 parent=0 notused=0 detail=SEARCH r USING INDEX i (<expr>=?)'] } };
    expect(judgePlan(notPushed).indexed).toBe(false);
  });

  it('reads FerretDB on PostgreSQL: an index or bitmap index scan under the plan, or a sequential scan', () => {
    const bitmap = {
      filterPushdown: true,
      queryPlanner: { Plan: { 'Node Type': 'Bitmap Heap Scan', Plans: [{ 'Node Type': 'Bitmap Index Scan', 'Index Name': 'r__id_lookup' }] } },
    };
    expect(judgePlan(bitmap)).toMatchObject({ server: 'ferretdb-postgresql', indexed: true });
    expect(judgePlan({ filterPushdown: true, queryPlanner: { Plan: { 'Node Type': 'Seq Scan' } } }).indexed).toBe(false);
  });

  it('reads MongoDB: no COLLSCAN stage, and no more documents examined than returned, give or take', () => {
    const ixscan = {
      queryPlanner: { winningPlan: { stage: 'FETCH', inputStage: { stage: 'IXSCAN', indexName: 'seq_1' } } },
      executionStats: { nReturned: 1000, totalDocsExamined: 1000 },
    };
    expect(judgePlan(ixscan)).toMatchObject({ server: 'mongodb', indexed: true });
    expect(judgePlan({ queryPlanner: { winningPlan: { stage: 'EXPRESS_IXSCAN' } }, executionStats: { nReturned: 1, totalDocsExamined: 1 } }).indexed).toBe(true);
    expect(judgePlan({ queryPlanner: { winningPlan: { stage: 'COLLSCAN' } } }).indexed).toBe(false);
    const wasteful = { queryPlanner: { winningPlan: { stage: 'FETCH', inputStage: { stage: 'IXSCAN' } } }, executionStats: { nReturned: 10, totalDocsExamined: 50_000 } };
    expect(judgePlan(wasteful).indexed).toBe(false);
  });
});
