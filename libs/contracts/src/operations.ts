import { z } from 'zod';
import type { JobContract } from './define.js';
import type { ServiceName } from './services.js';

/**
 * The operations log: one entry per proxy call, sync run, action run, inbound or outbound
 * webhook, connect-flow step, refresh and deploy. Each service records what it owns and
 * publishes batches on the OPERATIONS stream (`operations.recorded.<service>`); the gateway
 * stores them and answers `GET /operations`. Nothing in an entry may hold a credential: error
 * messages are the coded, credential-free messages and proxy paths carry no query.
 */
export const OPERATION_TYPES = ['proxy', 'sync_run', 'action_run', 'webhook_inbound', 'webhook_outbound', 'connect', 'refresh', 'deploy'] as const;
export type OperationType = (typeof OPERATION_TYPES)[number];

export const OPERATION_STATUSES = ['success', 'failure'] as const;
export type OperationStatus = (typeof OPERATION_STATUSES)[number];

/** The types each service records; only it may publish them (its own subject, its own schema). */
export const OPERATION_OWNERS = {
  proxy: ['proxy'],
  'credential-vault': ['connect', 'refresh'],
  'sync-scheduler': ['deploy', 'sync_run'],
  'action-runner': ['action_run'],
  'webhook-router': ['webhook_inbound', 'webhook_outbound'],
} as const satisfies Partial<Record<ServiceName, readonly OperationType[]>>;
export type OperationRecorder = keyof typeof OPERATION_OWNERS;

const operationFields = {
  /** Made by the recorder (time-ordered, unique): a batch delivered twice is stored once. */
  id: z.string().min(1).max(64),
  environment_id: z.string().min(1),
  status: z.enum(OPERATION_STATUSES),
  started_at: z.iso.datetime(),
  duration_ms: z.number().int().min(0),
  integration_id: z.string().max(255).optional(),
  connection_id: z.string().max(255).optional(),
  request_id: z.string().max(128).optional(),
  /** W3C trace id (32 hex digits) of the `traceparent` the work arrived with. */
  trace_id: z.string().regex(/^[0-9a-f]{32}$/).optional(),
  error: z.object({ code: z.string().max(64), message: z.string().max(1000) }).optional(),
  proxy: z.object({ method: z.string().max(16), path: z.string().max(2048), upstream_status: z.number().int().optional() }).optional(),
};

export const operation = z.object({ type: z.enum(OPERATION_TYPES), ...operationFields });
export type Operation = z.infer<typeof operation>;

/** How the API shows an entry: without the environment (the caller's own). */
export const operationView = operation.omit({ environment_id: true });
export type OperationView = z.infer<typeof operationView>;

function recordedOperation<S extends OperationRecorder>(service: S) {
  const types = OPERATION_OWNERS[service] as unknown as [OperationType, ...OperationType[]];
  return z.object({ type: z.enum(types), ...operationFields });
}

/** The operations each service may record: its own types only (batches as they come, pages as they are read). */
export const recordedOperations = {
  proxy: recordedOperation('proxy'),
  'credential-vault': recordedOperation('credential-vault'),
  'sync-scheduler': recordedOperation('sync-scheduler'),
  'action-runner': recordedOperation('action-runner'),
  'webhook-router': recordedOperation('webhook-router'),
} as const satisfies Record<OperationRecorder, z.ZodType>;

/** The most operations a page or a batch holds. */
export const OPERATIONS_PER_BATCH_MAX = 1000;
/** The most bytes of a page's operations as JSON: a batch of pages stays under NATS's max_payload. */
export const OPERATION_PAGE_BYTES_MAX = 512 * 1024;

/**
 * The environment ids a page may name: a stored page's `_id` begins with one, so no `:` or `;`,
 * which bound its ranges.
 */
export const OPERATION_PAGE_ENVIRONMENT = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * A page, as a recorder sends it: the operations of one environment and one second, as the JSON
 * array of their entries (each as `operation` above, `environment_id` included), raw-deflated
 * and base64-encoded. The gateway stores the bytes as they came: it neither inflates, parses
 * nor builds an object per operation as it stores them (that cost its core about 7 µs per
 * operation, as many as the proxy's calls), and checks every entry against the recording
 * service's schema, its environment and its second when it reads the page back.
 */
export const operationPage = z.object({
  environment_id: z.string().regex(OPERATION_PAGE_ENVIRONMENT),
  /** The lowest operation id of the page; its time prefix names the page's second. */
  first_id: z.string().regex(/^[0-9a-z]{9}[A-Za-z0-9_-]{1,55}$/),
  n: z.number().int().min(1).max(OPERATIONS_PER_BATCH_MAX),
  /** Base64 of the raw-deflated JSON array; at most `OPERATION_PAGE_BYTES_MAX` once inflated. */
  deflated: z.string().min(1).max(2 * OPERATION_PAGE_BYTES_MAX),
});
export type OperationPage = z.infer<typeof operationPage>;

/**
 * Operations of one service, sent together (a batch a second at most, or per many items): pages, as
 * recorders send them, or a list of operations, as recorders sent them before pages (still
 * stored, so a gateway upgraded first loses nothing from older replicas).
 */
function operationsBatch<S extends OperationRecorder>(service: S) {
  return {
    kind: 'job' as const,
    name: `operations.recorded.${service}`,
    subject: `operations.recorded.${service}`,
    stream: 'OPERATIONS',
    payload: z.union([
      z.object({ pages: z.array(operationPage).min(1).max(OPERATIONS_PER_BATCH_MAX) }),
      z.object({ operations: z.array(recordedOperations[service]).min(1).max(OPERATIONS_PER_BATCH_MAX) }),
    ]),
  } satisfies JobContract;
}

export const operationsContracts = {
  proxy: operationsBatch('proxy'),
  'credential-vault': operationsBatch('credential-vault'),
  'sync-scheduler': operationsBatch('sync-scheduler'),
  'action-runner': operationsBatch('action-runner'),
  'webhook-router': operationsBatch('webhook-router'),
} as const satisfies Record<OperationRecorder, JobContract>;
