import type { AnyContract, EventContract, JobContract, RequestContract } from './define.js';
import { givenUpContracts, givenUpDurableOf } from './bus.js';
import { actionContracts, functionsContracts } from './functions.js';
import { gatewayContracts } from './gateway.js';
import { PROXY_SUBJECT, proxyContracts } from './proxy.js';
import { OPERATION_OWNERS, operationsContracts, type OperationRecorder } from './operations.js';
import { recordsContracts } from './records.js';
import { ping, SERVICE_NAMES, type ServiceName } from './services.js';
import { STREAMS } from './streams.js';
import { syncContracts } from './syncs.js';
import { vaultContracts } from './vault.js';
import { vaultWebhookContracts, webhookContracts } from './webhooks.js';

/**
 * Who may do what on the wire. Every contract says which service serves (or publishes) it and
 * which services may call (or consume) it; the NATS server's authorization config is generated
 * from this table alone (`natsPermissions`, `renderNatsAuthorization`), so a subject missing
 * here is a subject nobody may use, and the contracts test fails until it is added.
 *
 * Deliberately broader than one contract, and why:
 * - replies: a service may answer any request NATS delivered to it (`allow_responses`, many
 *   messages for 15 minutes: proxied calls send keepalives and answer late), only to that
 *   request's reply subject, which the bus answers only when it is an inbox (`isInboxSubject`:
 *   NATS would let the caller name any subject, a stream's or the JetStream API's);
 * - pull streams: a service may ask for the chunks of any other identity's streams
 *   (`_INBOX.<owner>.s.*`); their names are random and only travel inside messages;
 * - JetStream: every service may look up and create (never delete or purge) EVENTS, JOBS and
 *   OPERATIONS, as whichever starts first creates them, and ask `$JS.API.INFO`; only
 *   `STREAMS_OWNER` may update them (a stream's config may add subjects and republish them: an
 *   update is a copy of any traffic); consumers, acks and KV buckets are per service and per
 *   durable, each durable pinned to its subject;
 * - the system account: services live in the default account and no permission names `$SYS`.
 */
type Service = ServiceName;

export interface RequestAccess {
  readonly kind: 'request';
  readonly server: Service;
  readonly callers: readonly Service[];
}

/** A durable pull consumer on a stream, pinned to one subject. */
export interface DurableAccess {
  readonly service: Service;
  readonly durable: string;
}

export interface StreamedAccess {
  readonly kind: 'event' | 'job';
  readonly publishers: readonly Service[];
  readonly durables: readonly DurableAccess[];
  /** Services that follow the subject live (core NATS subscription, every replica). */
  readonly live?: readonly Service[];
}

export interface BroadcastAccess {
  readonly kind: 'broadcast';
  readonly publishers: readonly Service[];
  readonly listeners: readonly Service[];
}

export type Access = RequestAccess | StreamedAccess | BroadcastAccess;

const request = (server: Service, callers: readonly Service[]): RequestAccess => ({ kind: 'request', server, callers });
const event = (publishers: readonly Service[], durables: readonly DurableAccess[] = [], live: readonly Service[] = []): StreamedAccess => ({
  kind: 'event',
  publishers,
  durables,
  live,
});
const job = (publishers: readonly Service[], durables: readonly DurableAccess[]): StreamedAccess => ({ kind: 'job', publishers, durables });
const broadcast = (publishers: readonly Service[], listeners: readonly Service[]): BroadcastAccess => ({ kind: 'broadcast', publishers, listeners });

const GATEWAY = 'gateway';
const VAULT = 'credential-vault';
const PROXY = 'proxy';
const SCHEDULER = 'sync-scheduler';
const RUNNER = 'action-runner';
const ROUTER = 'webhook-router';

const v = vaultContracts;
const w = webhookContracts;
const vw = vaultWebhookContracts;
const f = functionsContracts;
const a = actionContracts;
const s = syncContracts;
const r = recordsContracts;
const g = gatewayContracts;

/** The table: contract → access. Built as pairs so the type checker sees every contract object. */
const entries: Array<[AnyContract, Access]> = [
  ...SERVICE_NAMES.map((service): [AnyContract, Access] => [ping[service], request(service, [GATEWAY])]),

  [g.getEnvironment, request(GATEWAY, [RUNNER, ROUTER])],
  [g.getSigningKeys, request(GATEWAY, [ROUTER])],
  [g.apiKeyChanged, broadcast([GATEWAY], [GATEWAY])],
  [g.environmentChanged, broadcast([GATEWAY], [GATEWAY])],
  [g.environmentCreated, event([GATEWAY])],
  [g.environmentUpdated, event([GATEWAY])],

  [v.listProviders, request(VAULT, [GATEWAY])],
  [v.getProvider, request(VAULT, [GATEWAY, RUNNER])],
  [v.listIntegrations, request(VAULT, [GATEWAY])],
  [v.createIntegration, request(VAULT, [GATEWAY])],
  [v.getIntegration, request(VAULT, [GATEWAY, SCHEDULER, RUNNER])],
  [v.updateIntegration, request(VAULT, [GATEWAY])],
  [v.deleteIntegration, request(VAULT, [GATEWAY])],
  [v.createConnection, request(VAULT, [GATEWAY])],
  [v.listConnections, request(VAULT, [GATEWAY])],
  [v.integrationConnections, request(VAULT, [SCHEDULER])],
  [v.getConnection, request(VAULT, [GATEWAY, RUNNER])],
  // The gateway checks the connection an MCP request names before listing its tools.
  [v.resolveConnection, request(VAULT, [GATEWAY, SCHEDULER, RUNNER])],
  [v.patchConnection, request(VAULT, [GATEWAY])],
  [v.deleteConnection, request(VAULT, [GATEWAY])],
  [v.writeMetadata, request(VAULT, [GATEWAY, RUNNER])],
  [v.rotateKeys, request(VAULT, [GATEWAY])],
  [v.createConnectSession, request(VAULT, [GATEWAY])],
  [v.getConnectSession, request(VAULT, [GATEWAY])],
  [v.connectWithSession, request(VAULT, [GATEWAY])],
  [v.startOAuth, request(VAULT, [GATEWAY])],
  [v.finishOAuth, request(VAULT, [GATEWAY])],
  [v.finishOAuth1, request(VAULT, [GATEWAY])],
  [v.refuseOAuth, request(VAULT, [GATEWAY])],
  [v.connectClientCredentials, request(VAULT, [GATEWAY])],
  [v.deleteConnectSession, request(VAULT, [GATEWAY])],
  [v.connectionChanged, broadcast([VAULT], [VAULT, PROXY])],
  [v.connectionCreated, event([VAULT], [
    { service: SCHEDULER, durable: 'sync-scheduler-connection-created' },
    { service: RUNNER, durable: 'action-runner-post-creation' },
    { service: ROUTER, durable: 'webhook-router-auth-created' },
  ])],
  [v.connectionUpdated, event([VAULT])],
  [v.connectionDeleted, event([VAULT], [{ service: SCHEDULER, durable: 'sync-scheduler-connection-deleted' }], [RUNNER])],
  [v.connectionRefreshFailed, event([VAULT], [{ service: ROUTER, durable: 'webhook-router-auth-refresh-failed' }])],
  [v.integrationRemoved, event([VAULT], [{ service: SCHEDULER, durable: 'sync-scheduler-integration-removed' }])],

  // Plaintext credentials: only the proxy asks (the action-runner reads connections through
  // `vault.connections.get`, checked against its key's scopes by the gateway that started it).
  [proxyContracts.getCredentials, request(VAULT, [PROXY])],
  [proxyContracts.verifyCredentials, request(PROXY, [VAULT])],

  [r.write, request(SCHEDULER, [RUNNER])],
  [r.list, request(SCHEDULER, [GATEWAY])],
  [r.prune, request(SCHEDULER, [GATEWAY])],

  [w.inbound, job([GATEWAY], [{ service: ROUTER, durable: 'webhook-router-inbound' }])],
  [w.deliver, job([ROUTER], [{ service: ROUTER, durable: 'webhook-router-deliveries' }])],
  [w.received, event([ROUTER], [{ service: RUNNER, durable: 'action-runner-webhooks' }])],
  [w.postCreation, event([VAULT])],
  [w.preDeletion, event([VAULT])],
  [w.listInbound, request(ROUTER, [GATEWAY])],
  [w.listAttempts, request(ROUTER, [GATEWAY])],
  [vw.webhookIntegration, request(VAULT, [ROUTER])],
  [vw.matchConnection, request(VAULT, [ROUTER])],
  [vw.matchConnections, request(VAULT, [ROUTER])],

  [f.deploy, request(SCHEDULER, [GATEWAY])],
  [f.get, request(SCHEDULER, [RUNNER])],
  [f.listLifecycle, request(SCHEDULER, [RUNNER])],
  [f.listWebhookSyncs, request(SCHEDULER, [RUNNER])],
  [f.listActions, request(SCHEDULER, [GATEWAY])],
  [f.scriptsConfig, request(SCHEDULER, [GATEWAY])],
  [f.compile, request(SCHEDULER, [GATEWAY, RUNNER])],
  [f.deploymentChanged, broadcast([SCHEDULER], [RUNNER])],
  [f.deployed, event([SCHEDULER], [{ service: SCHEDULER, durable: 'sync-scheduler-deployed' }])],

  [a.trigger, request(RUNNER, [GATEWAY])],
  [a.getResult, request(RUNNER, [GATEWAY])],
  [a.dryRun, request(RUNNER, [GATEWAY])],
  [a.runPreDeletion, request(RUNNER, [GATEWAY])],
  [a.run, job([RUNNER], [{ service: RUNNER, durable: 'action-runner-actions' }])],
  [a.asyncCompleted, event([RUNNER], [{ service: ROUTER, durable: 'webhook-router-async-actions' }])],

  [s.run, job([SCHEDULER], [{ service: RUNNER, durable: 'action-runner-syncs' }])],
  [s.beginRun, request(SCHEDULER, [RUNNER])],
  [s.finishRun, request(SCHEDULER, [RUNNER])],
  [s.reportProgress, request(SCHEDULER, [RUNNER])],
  [s.trigger, request(SCHEDULER, [GATEWAY])],
  [s.setPaused, request(SCHEDULER, [GATEWAY])],
  [s.status, request(SCHEDULER, [GATEWAY])],
  [s.updateFrequency, request(SCHEDULER, [GATEWAY])],
  [s.createVariant, request(SCHEDULER, [GATEWAY])],
  [s.deleteVariant, request(SCHEDULER, [GATEWAY])],
  [s.leader, request(SCHEDULER, [GATEWAY])],
  [s.scheduleChanged, broadcast([SCHEDULER], [SCHEDULER])],
  [s.webhookRunFinished, request(SCHEDULER, [RUNNER])],
  [s.runCompleted, event([SCHEDULER], [
    { service: ROUTER, durable: 'webhook-router-sync-completed' },
    { service: VAULT, durable: 'credential-vault-sync-completed' },
  ])],
  [s.runFailed, event([SCHEDULER], [{ service: VAULT, durable: 'credential-vault-sync-failed' }])],

  // Any service's consumer may give a message up, and records it on its own subject; the gateway keeps the records for operators.
  ...SERVICE_NAMES.map((service): [AnyContract, Access] => [givenUpContracts[service], event([service], [{ service: GATEWAY, durable: givenUpDurableOf(service) }])]),

  // The operations log: each service publishes only its own batches (its own types); the gateway stores them.
  ...(Object.keys(OPERATION_OWNERS) as OperationRecorder[]).map((service): [AnyContract, Access] => [
    operationsContracts[service],
    job([service], [{ service: GATEWAY, durable: operationsDurableOf(service) }]),
  ]),
];

export const CONTRACT_ACCESS: ReadonlyMap<AnyContract, Access> = new Map(entries);

/**
 * The proxy's framed wire (`@latchkey/proxy-hop`) is not a contract object; it is served
 * by the proxy and called by the two services that proxy calls.
 */
export const PROXY_WIRE_ACCESS: RequestAccess = request(PROXY, [GATEWAY, RUNNER]);

/** JetStream KV buckets each service opens (the bucket is the `KV_<name>` stream). */
export const KV_ACCESS: Readonly<Record<string, Service>> = {
  rate_limits: GATEWAY,
  environment_locks: GATEWAY,
  refresh_locks: VAULT,
  vault_write_locks: VAULT,
  sync_scheduler_lease: SCHEDULER,
  sync_schedule_locks: SCHEDULER,
};

/**
 * The one identity that updates the shared streams' config (replicas, limits) at its start; the
 * others only create them when absent. Updating a stream amounts to reading any subject (a
 * stream may be given more subjects, and republish them), so the services that run customer
 * code or take provider traffic never may.
 */
export const STREAMS_OWNER: Service = GATEWAY;

/** Identities that exist only in test servers: never in deploy configs. */
export const TEST_IDENTITIES = ['observer'] as const;
export type NatsIdentityName = Service | (typeof TEST_IDENTITIES)[number];

/**
 * An identity's inboxes: replies to its requests and the pull streams it serves. Only that
 * identity may subscribe under its prefix, so nobody reads another's replies.
 */
export function inboxPrefixOf(identity: string): string {
  return `_INBOX.${identity}`;
}

/**
 * Pull streams (bodies too large for one message) are served under `<inbox prefix>.s`; readers
 * may publish there, but not into the owner's reply inboxes (whose next token is a random id,
 * never `s`), so no reader can forge an answer to the owner's requests.
 */
export function pullStreamPrefixOf(inboxPrefix: string): string {
  return `${inboxPrefix}.s`;
}

/**
 * Whether `subject` names a pull stream (`<inbox prefix>.s.<id>`). The subject comes from a
 * peer's answer, and a reader asks for chunks by publishing to it: anything else would let that
 * peer make the reader publish, under its own identity, wherever it may (a job subject, say).
 */
export function isPullStreamSubject(subject: string): boolean {
  return /^_INBOX(?:\.[A-Za-z0-9_-]+)?\.s\.[A-Za-z0-9]+$/.test(subject);
}

export interface NatsPermissions {
  publish: string[];
  subscribe: string[];
}

/** The gateway's durable consumer of one service's operations batches. */
export function operationsDurableOf(service: OperationRecorder): string {
  return `gateway-operations-${service}`;
}

export function streamOf(contract: EventContract | JobContract): string {
  if (contract.kind === 'job' && contract.stream !== undefined) return contract.stream;
  return contract.kind === 'event' ? STREAMS.events.name : STREAMS.jobs.name;
}

/**
 * What one service's NATS identity may publish and subscribe. Replies to requests it serves go
 * out under the server's `allow_responses`, never through these lists.
 */
/** The services `service` exchanges requests with, on either side (the proxy's wire included). */
function requestPeers(service: Service): Set<Service> {
  const peers = new Set<Service>();
  for (const access of [...CONTRACT_ACCESS.values(), PROXY_WIRE_ACCESS]) {
    if (access.kind !== 'request') continue;
    if (access.server === service) for (const caller of access.callers) peers.add(caller);
    else if (access.callers.includes(service)) peers.add(access.server);
  }
  peers.delete(service);
  return peers;
}

export function natsPermissions(service: Service): NatsPermissions {
  const publish = new Set<string>();
  const subscribe = new Set<string>();
  const inbox = inboxPrefixOf(service);
  subscribe.add(`${inbox}.>`);

  const requestRule = (subject: string, access: RequestAccess, perCaller: boolean) => {
    if (access.server === service) subscribe.add(perCaller ? `${subject}.*` : subject);
    if (access.callers.includes(service)) publish.add(perCaller ? `${subject}.${service}` : subject);
  };
  for (const [contract, access] of CONTRACT_ACCESS) {
    if (contract.kind === 'request' && access.kind === 'request') {
      requestRule(contract.subject, access, (contract as RequestContract).perCaller === true);
    } else if (contract.kind === 'broadcast' && access.kind === 'broadcast') {
      if (access.publishers.includes(service)) publish.add(contract.subject);
      if (access.listeners.includes(service)) subscribe.add(contract.subject);
    } else if ((contract.kind === 'event' || contract.kind === 'job') && (access.kind === 'event' || access.kind === 'job')) {
      const stream = streamOf(contract);
      if (access.publishers.includes(service)) publish.add(contract.subject);
      if (access.live?.includes(service)) subscribe.add(contract.subject);
      for (const { service: owner, durable } of access.durables) {
        if (owner !== service) continue;
        // The filter subject is part of the create subject, so the durable can only ever see this contract's messages.
        publish.add(`$JS.API.CONSUMER.CREATE.${stream}.${durable}.${contract.subject}`);
        publish.add(`$JS.API.CONSUMER.INFO.${stream}.${durable}`);
        publish.add(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${durable}`);
        publish.add(`$JS.ACK.${stream}.${durable}.>`);
      }
    } else {
      throw new Error(`access rule of ${contract.subject} is a ${access.kind} rule for a ${contract.kind}`);
    }
  }
  requestRule(PROXY_SUBJECT, PROXY_WIRE_ACCESS, false);

  // Pull streams: a service reads the bodies of services it exchanges requests with (a large
  // request its caller streams, a large answer its server streams), and of no other: the
  // proxy's streams carry providers' answers. Their subjects are random; knowing one means
  // having been sent it, but a leaked name must not be enough.
  for (const other of requestPeers(service)) publish.add(`${pullStreamPrefixOf(inboxPrefixOf(other))}.*`);

  // JetStream: every service creates the streams idempotently at start (`ensureStreams`), and
  // only their owner brings their config up to date; no service may delete or purge them.
  // `$JS.API.INFO` is the account check nats.js makes.
  publish.add('$JS.API.INFO');
  for (const stream of Object.values(STREAMS)) {
    for (const verb of service === STREAMS_OWNER ? ['INFO', 'CREATE', 'UPDATE'] : ['INFO', 'CREATE']) publish.add(`$JS.API.STREAM.${verb}.${stream.name}`);
  }
  for (const [bucket, owner] of Object.entries(KV_ACCESS)) {
    if (owner !== service) continue;
    const stream = `KV_${bucket}`;
    for (const verb of ['INFO', 'CREATE', 'UPDATE', 'MSG.GET']) publish.add(`$JS.API.STREAM.${verb}.${stream}`);
    publish.add(`$JS.API.DIRECT.GET.${stream}.>`);
    publish.add(`$JS.API.DIRECT.GET.${stream}`);
    publish.add(`$KV.${bucket}.>`);
  }
  return { publish: [...publish].sort(), subscribe: [...subscribe].sort() };
}

/** The environment variable the NATS server reads an identity's password from. */
export function natsPasswordVariable(identity: string): string {
  return `LATCHKEY_NATS_PASSWORD_${identity.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/**
 * How long a server may keep answering a request it received: proxied calls send keepalives
 * and their answer for up to the proxy's deadline (several minutes with retries).
 */
const RESPONSE_WINDOW = '15m';

const quote = (value: string) => JSON.stringify(value);
const list = (values: readonly string[], indent: string) => `[\n${values.map((value) => `${indent}  ${quote(value)},`).join('\n')}\n${indent}]`;

/**
 * The `authorization` block of the NATS server config: one user per service, its password
 * read from the server's environment (`natsPasswordVariable`), its permissions from
 * `natsPermissions`. With `testIdentities`, also the `observer` (every subject, both ways),
 * which only test servers get. Nobody else connects: NATS refuses clients without a user.
 */
export function renderNatsAuthorization(options: { testIdentities?: boolean } = {}): string {
  const users = SERVICE_NAMES.map((service) => {
    const { publish, subscribe } = natsPermissions(service);
    return [
      '    {',
      `      user: ${quote(service)}`,
      `      password: $${natsPasswordVariable(service)}`,
      '      permissions: {',
      `        publish: { allow: ${list(publish, '        ')} }`,
      `        subscribe: { allow: ${list(subscribe, '        ')} }`,
      `        allow_responses: { max: 1000000, expires: ${quote(RESPONSE_WINDOW)} }`,
      '      }',
      '    }',
    ].join('\n');
  });
  if (options.testIdentities) {
    users.push(
      [
        '    {',
        '      user: "observer"',
        `      password: $${natsPasswordVariable('observer')}`,
        '      permissions: { publish: { allow: [">"], deny: ["$SYS.>"] }, subscribe: { allow: [">"], deny: ["$SYS.>"] } }',
        '    }',
      ].join('\n'),
    );
  }
  return [
    '# Generated from libs/contracts (nats-access.ts) by `npm run nats-auth`: do not edit by hand.',
    '# Each Latchkey service connects as its own user and may publish and subscribe only what its',
    '# contracts name; passwords come from the server environment (LATCHKEY_NATS_PASSWORD_<SERVICE>).',
    'authorization {',
    '  users = [',
    users.join('\n'),
    '  ]',
    '}',
    '',
  ].join('\n');
}
