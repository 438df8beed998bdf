export { createBus, unavailable, type Bus, type BusOptions, type PublishOptions, type RequestOptions, type ServeOptions } from './create-bus.js';
export { consume, type ConsumeOptions, type RunningConsumer } from './consume.js';
export { consumeBatches, type BatchOutcome, type ConsumeBatchesOptions } from './consume-batches.js';
export { ensureStreams } from './streams.js';
export { openKv, type JsonKv, type KvEntryOf } from './kv.js';
export { REQUEST_ID_HEADER, decodeJson, encodeJson, outgoingHeaders, parseOrThrow, requestIdOf } from './wire.js';
export { batchedPublisher, type BatchedPublisher } from './batched-publish.js';
export { CHUNK_BYTES, pullAll, pullStream, serveBytes, servePullStream, type PullStreamOptions } from './pull-stream.js';
export { proxyExchange } from './proxy-exchange.js';
