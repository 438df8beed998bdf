import type { RecordAction } from '@latchkey/contracts';
import { pageContinues, type PageQuery, type RecordRepo, type RecordScope, type RecordWrite } from './record-repo.js';
import type { RecordDoc } from './record-model.js';

/** What the records store's tests share: records to write, batches written as the records handler writes them, and pages read as it reads them. */

/** A record to store: its payload names it, its content hash is its id. */
export function recordWrite(id: string, seq: number, action: RecordAction = 'ADDED', at = new Date()): RecordWrite {
  return { external_id: id, payload: JSON.stringify({ id }), hash: id, first_seen_at: at, last_modified_at: at, last_action: action, deleted_at: null, pruned_at: null, seq };
}

export const externalIdsOf = (docs: readonly RecordDoc[]) => docs.map((doc) => doc.external_id);
export const idRange = (from: number, to: number, prefix = 'r') => Array.from({ length: to - from }, (_, i) => `${prefix}${from + i}`);

/**
 * A batch as the records handler writes it: a lookup, then new records inserted and stored
 * ones written again (each with a new, higher sequence number; its old one leaves the log).
 * `padding` characters make each payload that much larger.
 */
export async function saveBatch(
  writer: Pick<RecordRepo, 'findByIds' | 'reserve' | 'insertNew' | 'upsertMany'>,
  target: RecordScope,
  externalIds: readonly string[],
  action: RecordAction = 'UPDATED',
  at = new Date(),
  padding = 0,
): Promise<void> {
  const existing = new Map((await writer.findByIds(target, externalIds)).map((doc) => [doc.external_id, doc]));
  const fresh = externalIds.filter((id) => !existing.has(id));
  const known = externalIds.filter((id) => existing.has(id));
  const first = await writer.reserve(target, externalIds.length);
  const writes: RecordWrite[] = [...fresh, ...known].map((id, offset) => ({
    ...recordWrite(id, first + offset, existing.has(id) ? action : 'ADDED', at),
    payload: JSON.stringify({ id, at: at.toISOString(), ...(padding > 0 ? { padding: 'x'.repeat(padding) } : {}) }),
    ...(action === 'DELETED' && existing.has(id) ? { deleted_at: at } : {}),
  }));
  await writer.insertNew(target, writes.slice(0, fresh.length));
  await writer.upsertMany(
    target,
    writes.slice(fresh.length),
    known.map((id) => ({ seq: existing.get(id)!.seq, action: existing.get(id)!.last_action })),
  );
}

/** Every page of a scope from a cursor on, as the records handler pages it. */
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
