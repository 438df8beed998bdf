import { pageContinues, type PageQuery, type RecordRepo, type RecordScope } from './record-repo.js';
import type { RecordDoc } from './record-model.js';

/** What the records store's tests share: every page of a scope from a cursor on, as the records handler pages it. */
export async function readAllPages(repo: Pick<RecordRepo, 'page'>, target: RecordScope, limit: number, query: Omit<PageQuery, 'limit' | 'afterSeq'> = {}, afterSeq?: number): Promise<RecordDoc[]> {
  const seen: RecordDoc[] = [];
  let cursor = afterSeq;
  for (;;) {
    const docs = await repo.page(target, { ...query, ...(cursor === undefined ? {} : { afterSeq: cursor }), limit: limit + 1 });
    const page = docs.slice(0, limit);
    seen.push(...page);
    if (!pageContinues(docs, limit, query.maxBytes)) return seen;
    cursor = page.at(-1)!.seq;
  }
}
