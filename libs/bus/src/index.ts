export {
  callerOf,
  createBus,
  unavailable,
  type Bus,
  type BusMessage,
  type BusOptions,
  type BusSubscription,
  type NatsIdentity,
  type PublishOptions,
  type RawMessage,
  type RequestOptions,
  type ServeOptions,
} from './create-bus.js';
export { consume, DAY_OF_DELIVERIES, HAND_BACK_WAIT_MS, type ConsumeOptions, type JobMessage, type RunningConsumer } from './consume.js';
export { consumeBatches, type BatchOutcome, type ConsumeBatchesOptions } from './consume-batches.js';
export { ensureStreams, type StreamLimits } from './streams.js';
export { openKv, type JsonKv, type KvEntryOf } from './kv.js';
export { createKvLocks, kvLockKey, oneAtATime, WRITE_KEYS, writesOneAtATime, type HeldLock, type Holding, type KvLocks, type OneAtATimeOptions } from './kv-locks.js';
export { REQUEST_ID_HEADER, decodeJson, encodeJson, inMessageContext, inSendSpan, isInboxSubject, outgoingHeaders, parseOrThrow, requestIdOf } from './wire.js';
export { batchedPublisher, type BatchedPublisher } from './batched-publish.js';
export { jetStreamPublisher, PublishNotAcknowledged, type JetStreamPublisher } from './jetstream-publish.js';
export { CHUNK_BYTES, pullAll, pullStream, serveBytes, servePullStream, type PullStreamOptions } from './pull-stream.js';
export {
  busOperationLog,
  createOperationLog,
  isoTime,
  newOperationId,
  operationsOfPages,
  traceIdOf,
  type OperationLog,
  type OperationRecorderOptions,
  type OperationRecorderStats,
  type RecordedOperation,
} from './operation-recorder.js';
export { recordedHandler, type OperationScope } from './recorded-handler.js';
export { type BusObserver, type OperationDropReason } from './observer.js';
