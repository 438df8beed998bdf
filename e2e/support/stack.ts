import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { inboxPrefixOf, SERVICE_NAMES, type NatsIdentityName, type ServiceName } from '@latchkey/contracts';
import { freePort, repoRoot, startMongo, startNats, startNatsCluster, type TestMongo, type TestNats, type TestNatsCluster } from '@latchkey/testing';

export interface StackProcess {
  service: ServiceName;
  child: ChildProcess;
  /** The gateway's base URL, or the probe server's for the other services. */
  url: string;
  /** What the process printed, for failure messages. */
  output(): string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number | null>;
}

export interface Stack {
  /** With `natsCluster`, stop() and start() act on every node at once. */
  nats: TestNats;
  /** The three-node cluster, when the stack was started with `natsCluster`. */
  natsCluster: TestNatsCluster | undefined;
  mongo: TestMongo;
  adminToken: string;
  bootstrapKey: string;
  gateways: StackProcess[];
  services: StackProcess[];
  /** The first gateway's base URL. */
  url: string;
  /** The database a service of this stack uses. */
  dbName(service: ServiceName): string;
  /**
   * Records every message on this stack's NATS from now on (as the test-only `observer`, which
   * may subscribe to everything): subject, reply subject, headers and body as text, to search
   * for canaries. Call `stop()` before `dispose()`.
   */
  snoop(): Promise<NatsSnoop>;
  /**
   * A raw NATS connection as `identity` (the test-only `observer` by default, which may use
   * every subject), with that identity's own inboxes; the caller closes it.
   */
  connectNats(identity?: NatsIdentityName): Promise<NatsConnection>;
  /** Stops a (non-gateway) service and starts it again with `env` added, then waits until it is ready. */
  restart(service: Exclude<ServiceName, 'gateway'>, env?: Record<string, string>): Promise<void>;
  /** The processes of one service (gateways included), in replica order. */
  replicas(service: ServiceName): StackProcess[];
  /** SIGKILL to replica `index` of `service`; resolves when it is gone. */
  kill(service: ServiceName, index: number): Promise<void>;
  /** SIGTERM to replica `index` of `service`; resolves with its exit code. */
  stop(service: ServiceName, index: number): Promise<number | null>;
  /** Starts replica `index` of `service` again (same port and environment), after stopping it if it runs; resolves when it is ready. */
  start(service: ServiceName, index: number): Promise<void>;
  dispose(): Promise<void>;
}

export interface SnoopedMessage {
  subject: string;
  reply: string | undefined;
  headers: string;
  data: string;
}

export interface NatsSnoop {
  readonly messages: readonly SnoopedMessage[];
  /** Everything seen so far as one string (subjects, headers, bodies), for `not.toContain(canary)`. */
  text(): string;
  stop(): Promise<void>;
}

export interface StackOptions {
  gateways?: number;
  /** Extra environment for every process. */
  env?: Record<string, string>;
  /** Extra environment for one service. */
  serviceEnv?: Partial<Record<ServiceName, Record<string, string>>>;
  /** How many processes of a (non-gateway) service to run; one by default. */
  replicas?: Partial<Record<Exclude<ServiceName, 'gateway'>, number>>;
  /** How long each process may take to be ready at start (30 s by default). */
  readyTimeoutMs?: number;
  /** A three-node NATS cluster (`startNatsCluster`) instead of one server; streams get three copies. */
  natsCluster?: boolean;
  /** Sees everything every process prints, whole (output() keeps only the last lines). */
  onOutput?: (service: ServiceName, text: string) => void;
}

function startProcess(
  service: ServiceName,
  env: Record<string, string>,
  url: string,
  onOutput?: StackOptions['onOutput'],
): StackProcess & { env: Record<string, string> } {
  const entry = join(repoRoot(), 'services', service, 'dist', 'main.js');
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`make build\` first`);
  // isolated-vm (the action-runner's sandbox) still asks for --no-node-snapshot on Node 24.
  const flags = service === 'action-runner' ? ['--no-node-snapshot'] : [];
  // The database a process uses is the one `env` names, never one the test runner's environment holds.
  const { MONGODB_URI: _uri, MONGODB_DB: _db, ...inherited } = process.env;
  const child = spawn(process.execPath, [...flags, entry], { env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    onOutput?.(service, text);
    lines.push(text);
    if (lines.length > 200) lines.shift();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return {
    service,
    child,
    url,
    env,
    output: () => lines.join(''),
    stop: () =>
      new Promise((resolve) => {
        // A process killed by a signal has a signalCode and no exitCode.
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => resolve(code));
        child.kill('SIGTERM');
      }),
  };
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what()}`);
}

/**
 * Starts the real stack as separate processes from the built services: a private NATS, a
 * MongoDB-wire server (FerretDB here, MongoDB 7 where Docker answers) with databases of this
 * stack's own, the five services and one or more gateways. Resolves when every gateway is ready.
 */
export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const [natsCluster, mongo] = await Promise.all([options.natsCluster ? startNatsCluster() : undefined, startMongo()]);
  const nats: TestNats = natsCluster ? clusterAsOne(natsCluster) : await startNats();
  const suffix = randomBytes(4).toString('hex');
  const adminToken = randomBytes(24).toString('base64url');
  const bootstrapKey = `lk_sk_${randomBytes(32).toString('base64url')}`;
  const common = {
    NATS_URL: nats.url,
    LOG_LEVEL: 'warn',
    ...(natsCluster ? { JETSTREAM_REPLICAS: '3' } : {}),
    ...options.env,
  };
  const dbOf = (service: ServiceName) => `e2e_${service.replace(/-/g, '_')}_${suffix}`;

  // Gateway ports first: the vault names the first gateway in providers' logo URLs.
  const gatewayPorts = await Promise.all(Array.from({ length: options.gateways ?? 1 }, () => freePort()));
  const publicUrl = `http://127.0.0.1:${gatewayPorts[0]}`;
  const services: Array<ReturnType<typeof startProcess>> = [];
  const encryptionKeys = `v1:${randomBytes(32).toString('base64')}`;
  const settingsKeys = `v1:${randomBytes(32).toString('base64')}`;
  for (const service of SERVICE_NAMES.filter((name) => name !== 'gateway')) {
    for (let replica = 0; replica < (options.replicas?.[service] ?? 1); replica++) {
      const port = await freePort();
      // Each service gets only its own secrets: its NATS password, its database but for the
      // proxy (which keeps none, and runs here without any MONGODB_*), and the vault its keys.
      const database = service === 'proxy' ? {} : { MONGODB_URI: mongo.uri, MONGODB_DB: dbOf(service) };
      const env: Record<string, string> = { ...common, NATS_PASSWORD: nats.credentials(service).password, ...database, HEALTH_PORT: String(port) };
      if (service === 'credential-vault') Object.assign(env, { ENCRYPTION_KEYS: encryptionKeys, PUBLIC_URL: publicUrl });
      services.push(startProcess(service, { ...env, ...options.serviceEnv?.[service] }, `http://127.0.0.1:${port}`, options.onOutput));
    }
  }
  const gateways: Array<ReturnType<typeof startProcess>> = [];
  for (const port of gatewayPorts) {
    gateways.push(
      startProcess(
        'gateway',
        {
          ...common,
          NATS_PASSWORD: nats.credentials('gateway').password,
          MONGODB_URI: mongo.uri,
          MONGODB_DB: dbOf('gateway'),
          PORT: String(port),
          // Several gateways run side by side here: none takes the default metrics port.
          METRICS_PORT: '0',
          PUBLIC_URL: `http://127.0.0.1:${port}`,
          ADMIN_TOKEN: adminToken,
          API_KEY_DIGEST_SECRET: `digest-${suffix}-0123456789abcdefghijklmnop`,
          BOOTSTRAP_SECRET_KEY: bootstrapKey,
          SETTINGS_ENCRYPTION_KEYS: settingsKeys,
          // No load balancer watches a test's /ready: close at once unless a test asks otherwise.
          SHUTDOWN_READY_DELAY_MS: '0',
          ...options.serviceEnv?.gateway,
        },
        `http://127.0.0.1:${port}`,
        options.onOutput,
      ),
    );
  }

  const all = (): StackProcess[] => [...services, ...gateways];
  const dispose = async () => {
    await Promise.all(all().map((proc) => proc.stop()));
    await Promise.all([nats.dispose(), mongo.dispose()]);
  };
  const restart = async (service: Exclude<ServiceName, 'gateway'>, env: Record<string, string> = {}) => {
    const index = services.findIndex((proc) => proc.service === service);
    const old = services[index]!;
    await old.stop();
    const fresh = startProcess(service, { ...old.env, ...env }, old.url, options.onOutput);
    services[index] = fresh;
    await waitUntil(async () => (await fetch(`${fresh.url}/ready`)).status === 200, 30_000, () => `${service} to restart:\n${fresh.output()}`);
  };
  try {
    for (const service of services) {
      await waitUntil(async () => (await fetch(`${service.url}/ready`)).status === 200, options.readyTimeoutMs ?? 30_000, () => `${service.service}:\n${service.output()}`);
    }
    for (const gateway of gateways) {
      await waitUntil(
        async () => (await fetch(`${gateway.url}/ready`)).status === 200,
        options.readyTimeoutMs ?? 30_000,
        () => `the stack to be ready; output:\n${all().map((proc) => `[${proc.service}] ${proc.output()}`).join('\n')}`,
      );
    }
  } catch (error) {
    await dispose();
    throw error;
  }
  const connectNats = async (identity: NatsIdentityName = 'observer') => {
    const { user, password } = nats.credentials(identity);
    return connect({ servers: nats.url, user, pass: password, inboxPrefix: inboxPrefixOf(user) });
  };
  const snoop = async (): Promise<NatsSnoop> => {
    const nc = await connectNats();
    const messages: SnoopedMessage[] = [];
    const decoder = new TextDecoder();
    nc.subscribe('>', {
      callback: (_error, msg) => {
        const headers = msg.headers ? [...msg.headers].map(([name, values]) => `${name}: ${values.join(', ')}`).join('\n') : '';
        messages.push({ subject: msg.subject, reply: msg.reply, headers, data: decoder.decode(msg.data) });
      },
    });
    await nc.flush();
    return {
      messages,
      text: () => messages.map((message) => `${message.subject} ${message.reply ?? ''}\n${message.headers}\n${message.data}`).join('\n'),
      stop: async () => {
        await nc.flush();
        await nc.close();
      },
    };
  };
  const list = (service: ServiceName) => (service === 'gateway' ? gateways : services);
  const replicas = (service: ServiceName) => list(service).filter((proc) => proc.service === service);
  const replica = (service: ServiceName, index: number) => {
    const proc = replicas(service)[index];
    if (!proc) throw new Error(`no replica ${index} of ${service}`);
    return proc;
  };
  const kill = async (service: ServiceName, index: number) => {
    const { child } = replica(service, index);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  };
  const startReplica = async (service: ServiceName, index: number) => {
    const old = replica(service, index);
    await old.stop();
    const fresh = startProcess(service, old.env, old.url, options.onOutput);
    const procs = list(service);
    procs[procs.indexOf(old)] = fresh;
    await waitUntil(async () => (await fetch(`${fresh.url}/ready`)).status === 200, 60_000, () => `${service} to start again:\n${fresh.output()}`);
  };
  return {
    nats,
    natsCluster,
    mongo,
    adminToken,
    bootstrapKey,
    gateways,
    services,
    url: gateways[0]!.url,
    dbName: dbOf,
    snoop,
    connectNats,
    restart,
    replicas,
    kill,
    stop: (service, index) => replica(service, index).stop(),
    start: startReplica,
    dispose,
  };
}

/** A cluster seen as one server: stop() kills every node, start() brings them all back. */
function clusterAsOne(cluster: TestNatsCluster): TestNats {
  return {
    url: cluster.url,
    credentials: (identity) => cluster.credentials(identity),
    stop: async () => void (await Promise.all(cluster.nodes.map((node) => node.kill()))),
    start: async () => void (await Promise.all(cluster.nodes.map((node) => node.restart()))),
    dispose: () => cluster.dispose(),
    reload: () => Promise.reject(new Error('the e2e cluster does not reload its authorization')),
  };
}

/** The secret of a new key in an environment (`dev` unless named) holding only `scopes`, made through the operator API. */
export async function createScopedKey(stack: Pick<Stack, 'url' | 'adminToken'>, scopes: string[], environment = 'dev'): Promise<string> {
  const created = await http(`${stack.url}/admin/environments/${environment}/api-keys`, { method: 'POST', token: stack.adminToken, body: { display_name: scopes.join(' '), scopes } });
  return created.json.data.secret as string;
}

/** A small JSON client for the tests. */
export async function http(
  url: string,
  options: { method?: string; token?: string; body?: unknown } = {},
): Promise<{ status: number; headers: Headers; json: any }> {
  const headers: Record<string, string> = {};
  if (options.token) headers['authorization'] = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(url, {
    method: options.method ?? 'GET',
    headers,
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: text ? JSON.parse(text) : undefined };
}
