import { AppError } from '@latchkey/errors';
import { environmentId, type EnvironmentId } from '@latchkey/mongo';
import { vaultContracts, type RecordAction, type RecordFailure, type recordsContracts, type RequestOf, type ResponseOf } from '@latchkey/contracts';
import type { Bus } from '@latchkey/bus';
import { WITHOUT_PAYLOAD, pageContinues, type RecordScope, type RecordWrite } from '../db/record-repo.js';
import type { RecordDoc } from '../db/record-model.js';
import type { ScheduleRepo } from '../db/schedule-repo.js';
import { decodeCursor, encodeCursor } from '../domain/record-cursor.js';
import { canonicalJson, contentHash, recordId } from '../domain/record-content.js';
import { checkFields } from '../domain/record-fields.js';
import { runIsOver } from '../domain/schedule-rules.js';
import type { SerializedRecordRepo } from '../domain/record-writes.js';

/**
 * A page of `GET /records` ends once its payloads reach this (one record at least): it is held
 * whole in the scheduler and the gateway, and leaves well within the bus's 32 MiB reply limit.
 */
const PAGE_BYTES = 8 * 1024 * 1024;

export interface RecordsDeps {
  bus: Bus;
  records: SerializedRecordRepo;
}

/** A write's runs: whether the run named is still going (`records.write`'s `run_id`). */
export interface WriteRecordsDeps extends RecordsDeps {
  runs: Pick<ScheduleRepo, 'getRun'>;
}

/**
 * Refuses the write of a scheduled run that is over. Checked as the scope's only writer: a
 * variant's deletion ends its run before it clears the variant's records under the same key,
 * so a write either lands before that clear (and goes with it) or finds its run over.
 */
async function checkRunGoing(deps: WriteRecordsDeps, environment: EnvironmentId, runId: string | undefined, attempt: number | undefined): Promise<void> {
  if (runId === undefined) return;
  const run = await deps.runs.getRun(environment, runId);
  if (!run || runIsOver(run)) {
    throw new AppError('function_failed', 'This sync run is over (its variant or connection was deleted, or another run took its place): its records were not written');
  }
  // The run went on in a later attempt (its job delivered again): this one's writes would land
  // beside, or over, the newer records of the one going on.
  if (attempt !== undefined && run.attempt !== attempt) {
    throw new AppError('function_failed', 'This attempt of the sync run was replaced by a later one: its records were not written');
  }
}

type ConnectionRef = { environment_id: string; connection_id: string; provider_config_key: string };

/** The connection's public id, from the vault (which answers 404 for an unknown one). */
async function scopeOf(deps: RecordsDeps, request: ConnectionRef & { model: string; variant: string }): Promise<RecordScope> {
  const { id } = await deps.bus.request(vaultContracts.resolveConnection, {
    environment_id: request.environment_id,
    connection_id: request.connection_id,
    provider_config_key: request.provider_config_key,
  });
  return { environment: environmentId(request.environment_id), connection: id, model: request.model, variant: request.variant };
}

/**
 * Writes to one scope run one at a time: sequence numbers are reserved and written in order, and
 * each write raises the scope's `visible` number only once its records are stored, so a reader
 * paging by cursor never passes a number still being written. In this replica they queue here;
 * across replicas each holds the scope's write key (`records.writing`, record-writes.ts).
 */
const scopeKey = (scope: RecordScope) => JSON.stringify([scope.environment, scope.connection, scope.model, scope.variant]);

/** A set that forgets its oldest members past a size. */
class BoundedSet {
  private readonly members = new Set<string>();
  constructor(private readonly limit: number) {}
  has = (key: string) => this.members.has(key);
  delete = (key: string) => void this.members.delete(key);
  add(key: string): void {
    this.members.delete(key);
    this.members.add(key);
    if (this.members.size > this.limit) this.members.delete(this.members.values().next().value as string);
  }
}

function createScopeQueue() {
  const tails = new Map<string, Promise<unknown>>();
  return <T>(scope: RecordScope, work: () => Promise<T>): Promise<T> => {
    const key = scopeKey(scope);
    const run = (tails.get(key) ?? Promise.resolve()).then(work, work);
    const tail = run.catch(() => undefined);
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return run;
  };
}

interface Change {
  write: RecordWrite;
  action: RecordAction;
}

export function writeRecordsHandler(deps: WriteRecordsDeps) {
  const queue = createScopeQueue();
  // Scopes whose last write met records already stored (a re-sync): those go straight to the
  // lookup. Only a hint, kept per replica: a wrong guess costs time, never correctness.
  const meetsStored = new BoundedSet(10_000);
  return async (request: RequestOf<typeof recordsContracts.write>): Promise<ResponseOf<typeof recordsContracts.write>> => {
    const scope = await scopeOf(deps, request);
    const failed: RecordFailure[] = [];
    // The last of several records with one id wins, as if they had been written in turn.
    const accepted = new Map<string, { index: number; record: Record<string, unknown> }>();
    request.records.forEach((record, index) => {
      const id = recordId(record);
      if (id === undefined) {
        failed.push({ index, errors: [{ code: 'required', message: 'id is required: a non-empty string or an integer', path: 'id' }] });
        return;
      }
      const problems = request.mode === 'save' && request.fields ? checkFields(record, request.fields) : [];
      if (problems.length > 0) failed.push({ index, id, errors: problems });
      else accepted.set(id, { index, record });
    });

    return queue(scope, () => deps.records.writing(scope, async (holding) => {
      await checkRunGoing(deps, scope.environment, request.run_id, request.attempt);
      const now = new Date();
      const changes: Change[] = [];
      let unchanged = 0;
      let rest = [...accepted];
      // A save into a scope that met no stored record last time is first tried as an insert of
      // every record: an initial sync then costs one insert and no lookup. Records already
      // stored are left out of it, and take the path below.
      if (request.mode === 'save' && !meetsStored.has(scopeKey(scope))) {
        const candidates = rest.map(([id, { record }]) => upsert(request, id, record, undefined, now) as Change);
        // Each step that writes goes only while the scope's key is surely held: a replica stalled
        // past its TTL between two steps may find another writer in the scope.
        holding.assertHeld();
        const first = await deps.records.reserve(scope, candidates.length);
        holding.assertHeld();
        const skipped = new Set(
          await deps.records.insertAbsent(
            scope,
            candidates.map((change, offset) => ({ ...change.write, seq: first + offset })),
          ),
        );
        changes.push(...candidates.filter((_, index) => !skipped.has(index)));
        rest = rest.filter((_, index) => skipped.has(index));
        if (rest.length > 0) meetsStored.add(scopeKey(scope));
      }
      if (rest.length > 0) {
        // A save compares hashes, and reads no stored payload (a CRM's records run to kilobytes
        // each): `upsert` tells a pruned record by its `pruned_at`. An update merges into the
        // payload, and a deletion keeps it.
        const projection = request.mode === 'save' ? WITHOUT_PAYLOAD : undefined;
        const existing = new Map((await deps.records.findByIds(scope, rest.map(([id]) => id), projection)).map((doc) => [doc.external_id, doc]));
        if (existing.size === 0) meetsStored.delete(scopeKey(scope));
        else meetsStored.add(scopeKey(scope));
        const looked: Change[] = [];
        for (const [id, { index, record }] of rest) {
          const previous = existing.get(id);
          const change = request.mode === 'delete' ? deletion(previous, now) : upsert(request, id, record, previous, now);
          if ('failure' in change) failed.push({ index, id, errors: [change.failure] });
          else if ('unchanged' in change) unchanged++;
          else looked.push(change);
        }
        holding.assertHeld();
        // Records never stored before go first, in one insert; then the rest, as updates. Sequence
        // numbers follow that order, so a reader still sees every lower number of the batch first.
        // Nothing to write: records found stored may be a stopped writer's, never published.
        if (looked.length === 0 && existing.size > 0) await deps.records.reveal(scope, Math.max(...[...existing.values()].map((doc) => doc.seq)));
        const fresh = looked.filter((change) => !existing.has(change.write.external_id));
        const known = looked.filter((change) => existing.has(change.write.external_id));
        const first = looked.length > 0 ? await deps.records.reserve(scope, looked.length) : 0;
        const numbered = [...fresh, ...known].map((change, offset) => ({ ...change.write, seq: first + offset }));
        holding.assertHeld();
        await deps.records.insertNew(scope, numbered.slice(0, fresh.length));
        holding.assertHeld();
        // Their earlier changes leave the change log: each record is read once, at its newest.
        await deps.records.upsertMany(
          scope,
          numbered.slice(fresh.length),
          known.map((change) => {
            const before = existing.get(change.write.external_id)!;
            return { seq: before.seq, action: before.last_action };
          }),
        );
        changes.push(...looked);
      }
      failed.sort((a, b) => a.index - b.index);
      const count = (action: RecordAction) => changes.filter((change) => change.action === action).length;
      return { added: count('ADDED'), updated: count('UPDATED'), deleted: count('DELETED'), unchanged, failed };
    }));
  };
}

function upsert(
  request: RequestOf<typeof recordsContracts.write>,
  id: string,
  record: Record<string, unknown>,
  previous: RecordDoc | undefined,
  now: Date,
): Change | { unchanged: true } | { failure: { code: string; message: string } } {
  let content = record;
  if (request.mode === 'update') {
    if (!previous || previous.deleted_at) return { failure: { code: 'unknown_record', message: `No record "${id}" to update` } };
    content = { ...(previous.payload === null ? {} : (JSON.parse(previous.payload) as Record<string, unknown>)), ...record };
    const problems = request.fields ? checkFields(content, request.fields) : [];
    if (problems.length > 0) return { failure: { code: 'invalid_record', message: problems.map((problem) => problem.message).join('; ') } };
  }
  const payload = canonicalJson(content);
  const hash = contentHash(payload);
  // A pruned record has a hash but no payload: saved again, it gets its payload back.
  if (previous && !previous.deleted_at && !previous.pruned_at && previous.hash === hash) return { unchanged: true };
  // A record seen again after its deletion starts over as added.
  const fresh = !previous || previous.deleted_at !== null;
  const action: RecordAction = fresh ? 'ADDED' : 'UPDATED';
  return {
    action,
    write: {
      external_id: id,
      payload,
      hash,
      first_seen_at: fresh ? now : previous.first_seen_at,
      last_modified_at: now,
      last_action: action,
      deleted_at: null,
      pruned_at: null,
      seq: 0,
    },
  };
}

function deletion(previous: RecordDoc | undefined, now: Date): Change | { unchanged: true } {
  if (!previous || previous.deleted_at) return { unchanged: true };
  return {
    action: 'DELETED',
    write: { ...withoutScope(previous), last_modified_at: now, last_action: 'DELETED', deleted_at: now, seq: 0 },
  };
}

function withoutScope(doc: RecordDoc): RecordWrite {
  return {
    external_id: doc.external_id,
    payload: doc.payload,
    hash: doc.hash,
    first_seen_at: doc.first_seen_at,
    last_modified_at: doc.last_modified_at,
    last_action: doc.last_action,
    deleted_at: doc.deleted_at,
    pruned_at: doc.pruned_at,
    seq: doc.seq,
  };
}

/** A stored record as customers read it: its own fields, then `_metadata`. */
function recordView(doc: RecordDoc): Record<string, unknown> {
  const own = doc.payload === null ? { id: doc.external_id } : (JSON.parse(doc.payload) as Record<string, unknown>);
  return {
    ...own,
    _metadata: {
      first_seen_at: doc.first_seen_at.toISOString(),
      last_modified_at: doc.last_modified_at.toISOString(),
      last_action: doc.last_action,
      deleted_at: doc.deleted_at?.toISOString() ?? null,
      cursor: encodeCursor(doc.seq),
      pruned_at: doc.pruned_at?.toISOString() ?? null,
    },
  };
}

export function listRecordsHandler(deps: RecordsDeps) {
  return async (request: RequestOf<typeof recordsContracts.list>): Promise<ResponseOf<typeof recordsContracts.list>> => {
    const afterSeq = request.cursor === undefined ? undefined : decodeCursor(request.cursor);
    if (request.cursor !== undefined && afterSeq === undefined) {
      throw new AppError('invalid_query_params', 'Invalid query parameters', { errors: [{ code: 'invalid_value', message: 'not a cursor this API gave out', path: 'cursor' }] });
    }
    const scope = await scopeOf(deps, request);
    const docs = await deps.records.page(scope, {
      ...(afterSeq === undefined ? {} : { afterSeq }),
      ...(request.modified_after === undefined ? {} : { modifiedAfter: new Date(request.modified_after) }),
      ...(request.filter === undefined ? {} : { actions: request.filter }),
      ...(request.ids === undefined ? {} : { ids: request.ids }),
      limit: request.limit + 1,
      maxBytes: PAGE_BYTES,
    });
    const page = docs.slice(0, request.limit);
    const last = page.at(-1);
    return { records: page.map(recordView), next_cursor: pageContinues(docs, request.limit, PAGE_BYTES) && last ? encodeCursor(last.seq) : null };
  };
}

export function pruneRecordsHandler(deps: RecordsDeps) {
  return async (request: RequestOf<typeof recordsContracts.prune>): Promise<ResponseOf<typeof recordsContracts.prune>> => {
    const untilSeq = decodeCursor(request.until_cursor);
    if (untilSeq === undefined) {
      throw new AppError('invalid_body', 'The request is invalid', { errors: [{ code: 'invalid_value', message: 'not a cursor this API gave out', path: 'until_cursor' }] });
    }
    const scope = await scopeOf(deps, request);
    const { count, hasMore } = await deps.records.prune(scope, untilSeq, request.limit, new Date());
    return { count, has_more: hasMore };
  };
}
