import { randomUUID } from 'node:crypto';
import type { Bus, OperationLog } from '@latchkey/bus';
import {
  BASE_VARIANT,
  functionsContracts,
  syncContracts,
  vaultContracts,
  type FunctionDescriptionWire,
  type ModelCounts,
  type PayloadOf,
  type RequestOf,
  type ResponseOf,
  type SyncStatusEntry,
} from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { currentRequestId, type Logger } from '@latchkey/logger';
import { environmentId, type EnvironmentId } from '@latchkey/mongo';
import type { DeploymentRepo } from '../db/deployment-repo.js';
import type { RecordRepo } from '../db/record-repo.js';
import type { ScheduleDoc, ScheduleTiming, SyncRunDoc } from '../db/schedule-model.js';
import type { ScheduleRepo, ScheduleTarget } from '../db/schedule-repo.js';
import { frequencyProblem, parseFrequency } from '../domain/frequency.js';
import type { ConnectionHolder } from './connection-deleted.js';
import { isAbandoned, nextRunAfter, runIsOver } from '../domain/schedule-rules.js';

export interface SyncsDeps {
  bus: Bus;
  logger: Logger;
  deployments: DeploymentRepo;
  schedules: ScheduleRepo;
  records: RecordRepo;
  /** The shortest frequency accepted. */
  minFrequencyMs: number;
  /** The operations log: one `sync_run` per finished run. */
  operations: Pick<OperationLog, 'record'>;
}

/** A finished run in the operations log; its error is the run's coded error, cut short. */
function recordRun(
  deps: Pick<SyncsDeps, 'operations'>,
  run: { environment_id: string; provider_config_key: string; connection_id: string; run_id: string; started_at: string; finished_at: string; failed: boolean; error?: { code: string; message: string } | null | undefined },
): void {
  const startedAt = Date.parse(run.started_at);
  const requestId = currentRequestId();
  deps.operations.record({
    type: 'sync_run',
    environment_id: run.environment_id,
    status: run.failed ? 'failure' : 'success',
    started_at: new Date(startedAt).toISOString(),
    duration_ms: Math.max(0, Date.parse(run.finished_at) - startedAt),
    integration_id: run.provider_config_key,
    connection_id: run.connection_id,
    ...(requestId === undefined ? {} : { request_id: requestId }),
    ...(run.error ? { error: { code: run.error.code.slice(0, 64), message: run.error.message.slice(0, 1000) } } : {}),
  });
}

type SyncDescription = Extract<FunctionDescriptionWire, { type: 'sync' }>;

/** A frequency the deployment gave that does not parse (older CLIs checked less) runs daily. */
const FALLBACK_INTERVAL_MS = 86_400_000;
const intervalOf = (schedule: Pick<ScheduleDoc, 'frequency' | 'frequency_override'>, minFrequencyMs: number) =>
  parseFrequency(schedule.frequency_override ?? schedule.frequency, minFrequencyMs) ?? FALLBACK_INTERVAL_MS;

/** The current deployment's syncs of an integration (at least `version`, when one was announced). */
async function deployedSyncs(deps: Pick<SyncsDeps, 'deployments'>, environment: EnvironmentId, providerConfigKey: string, version?: number): Promise<SyncDescription[]> {
  const deployment = await deps.deployments.currentDescriptions(environment, providerConfigKey, version === undefined ? {} : { atLeast: version });
  return (deployment?.functions ?? []).flatMap((fn) => (fn.description.type === 'sync' ? [fn.description] : []));
}

/** The named syncs (all when none are named); an unknown name is a 404. */
async function selectSyncs(deps: Pick<SyncsDeps, 'deployments'>, environment: EnvironmentId, providerConfigKey: string, names: readonly string[]) {
  const syncs = await deployedSyncs(deps, environment, providerConfigKey);
  if (names.length === 0) return syncs;
  return names.map((name) => {
    const found = syncs.find((sync) => sync.name === name);
    if (!found) throw new AppError('unknown_sync', `No sync "${name}" is deployed for integration "${providerConfigKey}"`);
    return found;
  });
}

/** A connection as schedules name it: its name, and the vault's numeric id of it. */
interface NamedConnection {
  connection_id: string;
  id: number;
}

/** The connections meant: the one named (404 when unknown), else every connection of the integration. */
async function selectConnections(deps: Pick<SyncsDeps, 'bus'>, environment: EnvironmentId, providerConfigKey: string, connectionId: string | undefined): Promise<NamedConnection[]> {
  if (connectionId !== undefined) {
    const found = await deps.bus.request(vaultContracts.resolveConnection, { environment_id: environment, connection_id: connectionId, provider_config_key: providerConfigKey });
    return [{ connection_id: found.connection_id, id: found.id }];
  }
  // Page by page, each from where the last stopped: every connection is read once, however many.
  const found = new Map<string, NamedConnection>();
  let before: number | undefined;
  do {
    const page = await deps.bus.request(vaultContracts.integrationConnections, {
      environment_id: environment,
      provider_config_key: providerConfigKey,
      limit: 1000,
      ...(before === undefined ? {} : { before }),
    });
    for (const { connection_id, id } of page.connections) found.set(connection_id, { connection_id, id });
    before = page.next ?? undefined;
  } while (before !== undefined);
  return [...found.values()];
}

/** A schedule as `schedules.list` reads it. */
type ListedSchedule = Omit<ScheduleDoc, 'checkpoint'>;

/**
 * When a schedule runs next on its sync's new deployed frequency: one interval after its last
 * run, as an override moves it. One that has yet to finish a run keeps its first run if sooner.
 */
function nextRunOn(schedule: ListedSchedule, frequency: string, minFrequencyMs: number, now: Date): Date {
  const next = nextRunAfter(schedule.last_finished_at ?? now, intervalOf({ frequency, frequency_override: null }, minFrequencyMs));
  return !schedule.last_finished_at && schedule.next_run_at && schedule.next_run_at < next ? schedule.next_run_at : next;
}

/**
 * Moves the `listed` schedules (every variant) to their sync's deployed frequency, with their next
 * run, and makes every (connection, sync) have its base schedule; new ones run at once. `listed`
 * holds the schedules of those connections, read before. Says whether `listed` is out of date.
 */
export async function ensureSchedules(
  deps: Pick<SyncsDeps, 'schedules' | 'minFrequencyMs'>,
  environment: EnvironmentId,
  providerConfigKey: string,
  connections: readonly NamedConnection[],
  syncs: readonly SyncDescription[],
  listed: readonly ListedSchedule[],
): Promise<boolean> {
  const now = new Date();
  let changed = false;
  const frequencies = new Map(syncs.map((sync) => [sync.name, sync.frequency]));
  for (const schedule of listed) {
    const frequency = frequencies.get(schedule.sync_name);
    if (frequency === undefined || schedule.frequency === frequency) continue;
    await deps.schedules.setDeployedFrequency(schedule._id, frequency, nextRunOn(schedule, frequency, deps.minFrequencyMs, now));
    changed = true;
  }
  const known = new Map(listed.map((schedule) => [schedule._id, schedule]));
  for (const { connection_id, id } of connections) {
    for (const sync of syncs) {
      const target = { provider_config_key: providerConfigKey, connection_id, sync_name: sync.name, variant: BASE_VARIANT };
      // One listed, made for this connection, is as it should be now; `ensure` makes one, or
      // gives one made before schedules kept their connection's id that id. Either way the list
      // lacked it as it is now: one `ensure` finds existing was made since the list was read (the
      // deploy event's work, racing this command), and is read again with the rest.
      if (known.get(deps.schedules.idOf(environment, target))?.connection === id) continue;
      await deps.schedules.ensure(environment, target, sync.frequency, now, id);
      changed = true;
    }
  }
  return changed;
}

/**
 * The schedules a request names (base and every variant). Commands (start, pause, trigger,
 * frequency, variants) first create base schedules that are missing (a deploy event still on its
 * way); a status read only reads.
 */
async function selectSchedules(
  deps: SyncsDeps,
  request: { environment_id: string; provider_config_key: string; syncs: string[]; connection_id?: string | undefined },
  options: { ensure: boolean } = { ensure: true },
) {
  const environment = environmentId(request.environment_id);
  const syncs = await selectSyncs(deps, environment, request.provider_config_key, request.syncs);
  const connections = await selectConnections(deps, environment, request.provider_config_key, request.connection_id);
  const names = new Set(syncs.map((sync) => sync.name));
  const wanted = new Set(connections.map((connection) => connection.connection_id));
  const list = async () =>
    (await deps.schedules.list(environment, request.provider_config_key, request.connection_id)).filter((schedule) => names.has(schedule.sync_name) && wanted.has(schedule.connection_id));
  let schedules = await list();
  // Read again only when a schedule was made or moved (a deploy event still on its way).
  if (options.ensure && (await ensureSchedules(deps, environment, request.provider_config_key, connections, syncs, schedules))) schedules = await list();
  return { environment, syncs, schedules, connections };
}

/**
 * Starts a run of a schedule unless one is in flight: claims the schedule, records the run, and
 * enqueues its job under the run's id (JetStream drops a duplicate). Returns whether it queued.
 * `prepare` runs once the schedule is claimed and before the job is queued (a full resync clears
 * the records there): no other run of the schedule can be writing while it does.
 */
export async function startRun(
  deps: Pick<SyncsDeps, 'bus' | 'schedules' | 'minFrequencyMs'>,
  schedule: ScheduleTiming,
  now: Date,
  prepare?: () => Promise<void>,
): Promise<boolean> {
  const runId = randomUUID();
  const run = await deps.schedules.claim(schedule, runId, nextRunAfter(now, intervalOf(schedule, deps.minFrequencyMs)), now);
  if (!run) return false;
  try {
    await prepare?.();
    await deps.bus.enqueue(syncContracts.run, { environment_id: schedule.environment_id, run_id: runId }, { msgId: `sync-run-${runId}` });
  } catch (error) {
    // The job may be stored all the same (only its acknowledgement lost): the run is ended
    // before its schedule is freed, unless that job already began it.
    await giveBack(deps, run);
    throw error;
  }
  // Stored: the run waits its turn in JetStream, and no claim replaces it before SYNC_RUN_STALE_MS.
  // Unmarked (this write failed), it is replaced past SYNC_RUN_UNSTARTED_MS, as a lost one.
  await deps.schedules.markQueued(run, new Date()).catch(() => undefined);
  return true;
}

/** How often, and how many times, giving a schedule back is tried again while the bus is away. */
const GIVE_BACK_RETRY_MS = 1000;
const GIVE_BACK_ATTEMPTS = 60;

/**
 * Gives back the schedule of a run whose job could not be queued (`abandonUnqueued`). The bus
 * that failed the job often fails this too (each schedule write holds a key in NATS KV): then it
 * is tried again in the background, every second for a minute, so the schedule is free soon after
 * the bus returns, not only once the claim has aged past SYNC_RUN_UNSTARTED_MS (two minutes, in
 * which no trigger and no scheduled run starts it). The caller hears the job's error either way.
 */
async function giveBack(deps: Pick<SyncsDeps, 'schedules'>, run: SyncRunDoc): Promise<void> {
  const attempt = () => deps.schedules.abandonUnqueued(run, new Date()).then(
    () => true,
    () => false,
  );
  if (await attempt()) return;
  void (async () => {
    for (let left = GIVE_BACK_ATTEMPTS; left > 0; left--) {
      await new Promise((resolve) => setTimeout(resolve, GIVE_BACK_RETRY_MS).unref());
      if (await attempt()) return;
    }
  })();
}

/** Clears a schedule's records and checkpoint: the next run starts from the beginning. */
async function startOver(deps: SyncsDeps, environment: EnvironmentId, schedule: Pick<ScheduleDoc, '_id' | 'connection_id' | 'provider_config_key' | 'variant'>, sync: SyncDescription | undefined): Promise<void> {
  const { id } = await deps.bus.request(vaultContracts.resolveConnection, { environment_id: environment, connection_id: schedule.connection_id, provider_config_key: schedule.provider_config_key });
  // Starting over means from the beginning: the function finds no checkpoint. Cleared first: a
  // clear of the records that fails half-way then leaves a run that fetches everything again, not
  // one resuming past records already gone.
  await deps.schedules.clearCheckpoint(schedule._id);
  for (const model of sync?.models ?? []) await deps.records.clear({ environment, connection: id, model: model.name, variant: schedule.variant });
}

export function triggerHandler(deps: SyncsDeps) {
  return async (request: RequestOf<typeof syncContracts.trigger>): Promise<ResponseOf<typeof syncContracts.trigger>> => {
    const { environment, syncs, schedules } = await selectSchedules(deps, request);
    const variant = request.variant ?? BASE_VARIANT;
    const now = new Date();
    let queued = 0;
    const meant = schedules.filter((item) => item.variant === variant);
    // Base schedules are made as needed; a variant only by its own request.
    if (meant.length === 0 && variant !== BASE_VARIANT) {
      throw new AppError('unknown_sync_variant', `No connection of integration "${request.provider_config_key}" has variant "${variant}" of ${request.syncs.length === 0 ? 'its syncs' : request.syncs.map((name) => `"${name}"`).join(', ')}`);
    }
    for (const schedule of meant) {
      // A schedule shown running is claimed too: the claim queues nothing while its run is alive,
      // and takes the schedule back from a run that was lost (`claim`), as the scheduler loop
      // does for overdue ones. A full resync clears only once the schedule is claimed: a run the
      // scheduler started since the list was read keeps its records, and this trigger queues nothing.
      const prepare = request.full_resync
        ? () => startOver(deps, environment, schedule, syncs.find((item) => item.name === schedule.sync_name))
        : request.reset_checkpoint
          ? async () => void (await deps.schedules.clearCheckpoint(schedule._id))
          : undefined;
      if (await startRun(deps, schedule, now, prepare)) queued++;
    }
    return { queued };
  };
}

export function setPausedHandler(deps: SyncsDeps) {
  return async (request: RequestOf<typeof syncContracts.setPaused>): Promise<ResponseOf<typeof syncContracts.setPaused>> => {
    const { schedules } = await selectSchedules(deps, request);
    return { changed: await deps.schedules.setPaused(schedules.map((schedule) => schedule._id), request.paused) };
  };
}

function statusOf(schedule: Omit<ScheduleDoc, 'checkpoint'>): SyncStatusEntry['status'] {
  if (schedule.running !== null) return 'RUNNING';
  if (schedule.paused) return 'PAUSED';
  return schedule.last_status ?? 'STOPPED';
}

/** Records a run wrote: added, updated and deleted, over its models. */
function recordsWritten(results: ModelCounts): number {
  return Object.values(results).reduce((sum, counts) => sum + counts.added + counts.updated + counts.deleted, 0);
}

/** Schedules whose run and record counts `GET /sync/status` reads at once. */
const STATUS_READS_AT_ONCE = 16;

export function statusHandler(deps: SyncsDeps) {
  return async (request: RequestOf<typeof syncContracts.status>): Promise<ResponseOf<typeof syncContracts.status>> => {
    const { environment, syncs, schedules, connections } = await selectSchedules(deps, request, { ensure: false });
    // The vault named every connection meant, with its numeric id (the records' scope), already.
    const publicIds = new Map(connections.map(({ connection_id, id }) => [connection_id, id]));
    const entryOf = async (schedule: (typeof schedules)[number]): Promise<SyncStatusEntry> => {
      // Selected schedules are of those connections only.
      const connection = publicIds.get(schedule.connection_id)!;
      const models = syncs.find((sync) => sync.name === schedule.sync_name)?.models ?? [];
      const [running, counts] = await Promise.all([
        schedule.running === null ? null : deps.schedules.getRun(environment, schedule.running),
        Promise.all(models.map((model) => deps.records.count({ environment, connection, model: model.name, variant: schedule.variant }))),
      ]);
      return {
        id: schedule._id,
        connection_id: schedule.connection_id,
        name: schedule.sync_name,
        variant: schedule.variant,
        status: statusOf(schedule),
        type: 'INCREMENTAL',
        frequency: schedule.frequency_override ?? schedule.frequency,
        finishedAt: schedule.last_finished_at?.toISOString() ?? null,
        nextScheduledSyncAt: schedule.paused ? null : (schedule.next_run_at?.toISOString() ?? null),
        latestResult: schedule.last_results,
        recordCount: Object.fromEntries(models.map((model, i) => [model.name, counts[i]!])),
        latestError: schedule.last_error,
        progress:
          running && (running.status === 'QUEUED' || running.status === 'RUNNING')
            ? { startedAt: running.started_at?.toISOString() ?? null, records: recordsWritten(running.results), results: running.results }
            : null,
      };
    };
    // A few schedules at a time: an integration's many connections answer within the caller's
    // deadline, and the database is not asked everything at once.
    const entries: SyncStatusEntry[] = [];
    for (let start = 0; start < schedules.length; start += STATUS_READS_AT_ONCE) {
      entries.push(...(await Promise.all(schedules.slice(start, start + STATUS_READS_AT_ONCE).map(entryOf))));
    }
    return { syncs: entries };
  };
}

export function updateFrequencyHandler(deps: SyncsDeps) {
  return async (request: RequestOf<typeof syncContracts.updateFrequency>): Promise<ResponseOf<typeof syncContracts.updateFrequency>> => {
    if (request.frequency !== null && parseFrequency(request.frequency, deps.minFrequencyMs) === undefined) {
      throw new AppError('invalid_frequency', frequencyProblem(request.frequency, deps.minFrequencyMs));
    }
    const schedule = await scheduleOf(deps, request);
    const frequency = request.frequency ?? schedule.frequency;
    // The next run moves to one interval of the new frequency after the last run (or from now).
    const from = schedule.last_finished_at ?? new Date();
    await deps.schedules.setFrequencyOverride(schedule._id, request.frequency, nextRunAfter(from, intervalOf({ frequency: schedule.frequency, frequency_override: request.frequency }, deps.minFrequencyMs)));
    return { frequency };
  };
}

/** One connection's schedule of a sync in a variant; 404 when the sync, connection or variant is unknown. */
async function scheduleOf(deps: SyncsDeps, request: { environment_id: string; provider_config_key: string; connection_id: string; sync_name: string; variant: string }) {
  const { environment, schedules } = await selectSchedules(deps, { ...request, syncs: [request.sync_name] });
  const found = schedules.find((schedule) => schedule.variant === request.variant);
  if (!found) throw new AppError('unknown_sync_variant', `Sync "${request.sync_name}" has no variant "${request.variant}" for connection "${request.connection_id}"`);
  return Object.assign(found, { environment });
}

export function createVariantHandler(deps: SyncsDeps) {
  return async (request: RequestOf<typeof syncContracts.createVariant>): Promise<ResponseOf<typeof syncContracts.createVariant>> => {
    if (request.variant === BASE_VARIANT) throw new AppError('invalid_uri_params', `"${BASE_VARIANT}" is every sync's own variant`);
    const { environment, syncs, connections } = await selectSchedules(deps, { ...request, syncs: [request.sync_name] });
    const target: ScheduleTarget = { provider_config_key: request.provider_config_key, connection_id: request.connection_id, sync_name: request.sync_name, variant: request.variant };
    // Made for this connection (its numeric id), as its base schedules are: a name taken again does not inherit it.
    const made = await deps.schedules.ensure(environment, target, syncs[0]!.frequency, new Date(), connections[0]!.id);
    if (made === 'existing') throw new AppError('failed_sync_variant_creation', `Sync "${request.sync_name}" already has a variant "${request.variant}"`);
    return { id: deps.schedules.idOf(environment, target), name: request.sync_name, variant: request.variant };
  };
}

export function deleteVariantHandler(deps: SyncsDeps) {
  return async (request: RequestOf<typeof syncContracts.deleteVariant>): Promise<ResponseOf<typeof syncContracts.deleteVariant>> => {
    if (request.variant === BASE_VARIANT) throw new AppError('invalid_uri_params', `"${BASE_VARIANT}" cannot be deleted`);
    // A deletion whose clear failed after its schedule went is asked again: the variant's records
    // are cleared then too, and only a variant with neither schedule nor records is unknown.
    const schedule = await scheduleOf(deps, request).catch((error: unknown) => {
      if (error instanceof AppError && error.code === 'unknown_sync_variant') return { missing: error };
      throw error;
    });
    const environment = environmentId(request.environment_id);
    const { id } = await deps.bus.request(vaultContracts.resolveConnection, { environment_id: environment, connection_id: request.connection_id, provider_config_key: request.provider_config_key });
    const models = (await deployedSyncs(deps, environment, request.provider_config_key)).find((sync) => sync.name === request.sync_name)?.models ?? [];
    // Its run ends with its schedule, before the clear: a write either lands first and goes with
    // the clear, or finds its run over.
    if (!('missing' in schedule)) await deps.schedules.remove([schedule._id]);
    let cleared = 0;
    for (const model of models) cleared += await deps.records.clear({ environment, connection: id, model: model.name, variant: request.variant });
    if ('missing' in schedule && cleared === 0) throw schedule.missing;
    return { success: true };
  };
}

export function beginRunHandler(deps: Pick<SyncsDeps, 'bus' | 'schedules'>) {
  return async (request: RequestOf<typeof syncContracts.beginRun>): Promise<ResponseOf<typeof syncContracts.beginRun>> => {
    const environment = environmentId(request.environment_id);
    const run = await deps.schedules.getRun(environment, request.run_id);
    if (!run) return { run: null };
    // Each claim is a new attempt, and the earlier ones' writes are refused from here on: a job
    // delivered again may find its first attempt still going (its replica cut off from NATS
    // past the ack wait, say).
    const begun = runIsOver(run) ? null : await deps.schedules.beginAttempt(run, new Date());
    if (!begun) {
      // Over, or ended meanwhile (abandoned as its job could not be queued): read again.
      const over = runIsOver(run) ? run : await deps.schedules.getRun(environment, request.run_id);
      if (over && runIsOver(over)) await settleOver(deps, over);
      return { run: null };
    }
    const schedule = await deps.schedules.getSchedule(begun.schedule_id);
    return {
      run: {
        provider_config_key: begun.provider_config_key,
        connection_id: begun.connection_id,
        sync_name: begun.sync_name,
        variant: begun.variant,
        started_at: (begun.started_at ?? new Date()).toISOString(),
        checkpoint: schedule?.checkpoint ?? null,
        results: begun.results ?? {},
        attempt: begun.attempt,
      },
    };
  };
}

export function reportProgressHandler(deps: SyncsDeps) {
  return async (request: RequestOf<typeof syncContracts.reportProgress>): Promise<ResponseOf<typeof syncContracts.reportProgress>> => {
    const run = await deps.schedules.getRun(environmentId(request.environment_id), request.run_id);
    if (!run) throw new AppError('not_found', `No sync run "${request.run_id}"`);
    return { recorded: await deps.schedules.recordProgress(run, request.results, request.checkpoint, new Date(), request.attempt) };
  };
}

export function finishRunHandler(deps: SyncsDeps) {
  return async (request: RequestOf<typeof syncContracts.finishRun>): Promise<ResponseOf<typeof syncContracts.finishRun>> => {
    const environment = environmentId(request.environment_id);
    const run = await deps.schedules.getRun(environment, request.run_id);
    if (!run) throw new AppError('not_found', `No sync run "${request.run_id}"`);
    const finishedAt = new Date();
    const recorded = await deps.schedules.finish(run, { status: request.status, results: request.results, error: request.error ?? null }, finishedAt, request.attempt);
    const finished = (await deps.schedules.getRun(environment, run._id)) ?? run;
    // A run ended as abandoned (its schedule removed, or taken over) was never announced, and is
    // not now: its end would mark the connection's sync failed for a run nobody waits for. A
    // run still going is a later attempt's to end.
    if (isAbandoned(finished) || !runIsOver(finished)) return { recorded };
    const event = await announceEnd(deps, finished, finishedAt);
    if (recorded) recordRun(deps, { ...event, failed: finished.status === 'ERROR', error: finished.error });
    return { recorded };
  };
}

/**
 * Publishes a finished run's end (`sync.run.completed` or `.failed`). Published again on a
 * repeated finish under the same message id: JetStream keeps one.
 */
async function announceEnd(deps: Pick<SyncsDeps, 'bus'>, run: SyncRunDoc, finishedAt: Date): Promise<PayloadOf<typeof syncContracts.runCompleted>> {
  const event: PayloadOf<typeof syncContracts.runCompleted> = {
    environment_id: run.environment_id,
    run_id: run._id,
    provider_config_key: run.provider_config_key,
    connection_id: run.connection_id,
    sync_name: run.sync_name,
    variant: run.variant,
    results: run.results as ModelCounts,
    started_at: (run.started_at ?? finishedAt).toISOString(),
    finished_at: (run.finished_at ?? finishedAt).toISOString(),
    ...(run.error ? { error: run.error } : {}),
  };
  await deps.bus.publish(run.status === 'ERROR' ? syncContracts.runFailed : syncContracts.runCompleted, event, { msgId: `sync-run-done-${run._id}` });
  return event;
}

/**
 * A job delivered again finds its run over: the finish that ended it may have stopped before
 * freeing the schedule or announcing the end (a replica killed, NATS away), and the runner got
 * no answer. Both are done again here, at once, instead of the schedule showing RUNNING until a
 * claim takes it back. A run abandoned by such a claim was never announced, and is not now.
 */
async function settleOver(deps: Pick<SyncsDeps, 'bus' | 'schedules'>, run: SyncRunDoc): Promise<void> {
  await deps.schedules.free(run);
  if (!isAbandoned(run)) await announceEnd(deps, run, run.finished_at ?? new Date());
}

/** A sync's `onWebhook` run, announced like a run of its `base` variant (see the contract). */
export function webhookRunFinishedHandler(deps: Pick<SyncsDeps, 'bus' | 'operations'>) {
  return async (request: RequestOf<typeof syncContracts.webhookRunFinished>): Promise<ResponseOf<typeof syncContracts.webhookRunFinished>> => {
    const event: PayloadOf<typeof syncContracts.runCompleted> = {
      environment_id: request.environment_id,
      run_id: request.run_id,
      provider_config_key: request.provider_config_key,
      connection_id: request.connection_id,
      sync_name: request.sync_name,
      variant: 'base',
      results: request.results,
      started_at: request.started_at,
      finished_at: new Date().toISOString(),
      ...(request.error ? { error: request.error } : {}),
    };
    await deps.bus.publish(request.status === 'ERROR' ? syncContracts.runFailed : syncContracts.runCompleted, event, { msgId: `sync-run-done-${request.run_id}` });
    recordRun(deps, { ...event, failed: request.status === 'ERROR', error: request.error });
    return { published: true };
  };
}

/**
 * A deployment's syncs get a schedule for every connection of the integration, and every
 * schedule of theirs (each variant) takes the deployed frequency; syncs it no longer has lose theirs.
 */
export function deployedHandler(deps: SyncsDeps) {
  return async (event: { environment_id: string; provider_config_key: string; version?: number }) => {
    const environment = environmentId(event.environment_id);
    const syncs = await deployedSyncs(deps, environment, event.provider_config_key, event.version);
    const names = new Set(syncs.map((sync) => sync.name));
    const listed = await deps.schedules.list(environment, event.provider_config_key);
    const gone = listed.filter((schedule) => !names.has(schedule.sync_name));
    if (gone.length > 0) await deps.schedules.remove(gone.map((schedule) => schedule._id));
    if (syncs.length === 0) return;
    const connections = await selectConnections(deps, environment, event.provider_config_key, undefined);
    await ensureSchedules(deps, environment, event.provider_config_key, connections, syncs, listed.filter((schedule) => names.has(schedule.sync_name)));
  };
}

/**
 * `integration.removed`: the functions deployed under the key until then go, and with them the
 * schedules of its syncs (its connections' own deletions take the rest). A deployment made
 * later is a new integration's of that key, and stays.
 */
export function integrationRemovedHandler(deps: SyncsDeps) {
  return async (event: PayloadOf<typeof vaultContracts.integrationRemoved>) => {
    const environment = environmentId(event.environment_id);
    const removed = await deps.deployments.removeUpTo(environment, event.unique_key, new Date(event.at));
    // Every step after is done again on a redelivery (one may have failed after the removal).
    if (removed > 0) deps.logger.info('dropped the functions deployed for a removed integration', { provider_config_key: event.unique_key, deployments: removed });
    // Action-runner replicas drop what they cached of them; the version left is the current one, if any.
    const current = await deps.deployments.currentDescriptions(environment, event.unique_key);
    deps.bus.broadcast(functionsContracts.deploymentChanged, { environment_id: environment, provider_config_key: event.unique_key, version: current?.version ?? 0 });
    await deployedHandler(deps)({ environment_id: event.environment_id, provider_config_key: event.unique_key });
  };
}

/**
 * A new connection gets a schedule for each deployed sync of its integration. Schedules its name
 * still holds for a connection deleted before it (that deletion not yet heard) are that one's:
 * they go first, ending their runs, so nothing of the old connection (checkpoint, pause,
 * frequency, variants, a run in flight) carries over.
 */
export function connectionCreatedHandler(deps: SyncsDeps & { holderOf: ConnectionHolder }) {
  return async (event: { environment_id: string; provider_config_key: string; connection_id: string; id: number }) => {
    const environment = environmentId(event.environment_id);
    const listed = await deps.schedules.list(environment, event.provider_config_key, event.connection_id);
    const others = listed.filter((schedule) => schedule.connection !== undefined && schedule.connection !== null && schedule.connection !== event.id);
    if (others.length > 0) {
      // A creation heard late (redelivered after an outage), once the name holds a newer
      // connection, is that one's no longer: nothing of it is made, nothing of the newer one goes.
      if ((await deps.holderOf(event)) !== event.id) return;
      await deps.schedules.remove(others.map((schedule) => schedule._id));
    }
    const syncs = await deployedSyncs(deps, environment, event.provider_config_key);
    const kept = listed.filter((schedule) => !others.includes(schedule));
    await ensureSchedules(deps, environment, event.provider_config_key, [{ connection_id: event.connection_id, id: event.id }], syncs, kept);
  };
}

/**
 * A deleted connection's schedules go (its records go in the records consumer): those made for
 * it, and those of its name made before schedules kept their connection's id, unless the name
 * is held by another connection now (`nameFree`: the vault's answer).
 */
export async function removeConnectionSchedules(deps: Pick<SyncsDeps, 'schedules'>, event: { environment_id: string; provider_config_key: string; connection_id: string; id: number }, nameFree: () => Promise<boolean>) {
  const schedules = await deps.schedules.list(environmentId(event.environment_id), event.provider_config_key, event.connection_id);
  const unknown = schedules.filter((schedule) => schedule.connection === undefined || schedule.connection === null);
  const gone = [...schedules.filter((schedule) => schedule.connection === event.id), ...(unknown.length > 0 && (await nameFree()) ? unknown : [])];
  if (gone.length > 0) await deps.schedules.remove(gone.map((schedule) => schedule._id));
}
