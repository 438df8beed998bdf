import { jetstreamManager } from '@nats-io/jetstream';
import { SERVICE_NAMES, type ServiceName } from '@latchkey/contracts';
import { startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from '../support/providers.js';
import { startStack, type Stack } from '../support/stack.js';

/**
 * The NATS-node-loss reproduction (issue 20): proxy calls with an API-key connection to a
 * loopback upstream, at a steady rate through each gateway directly, while each NATS node in turn
 * is SIGKILLed and restarted. Every failed call is kept (time, status, code, gateway), and so is
 * every disconnect and reconnect the services logged, to read the failure window against.
 * `make chaos-nats` runs it (the goal: each window under 5 s).
 */

export interface ProxyCallRecord {
  gateway: number;
  start: number;
  end: number;
  status: number | 'error';
  code?: string;
}

export interface BusEvent {
  at: number;
  service: ServiceName;
  event: 'disconnect' | 'reconnect';
  server: string;
}

export interface NodeLossWindow {
  node: number;
  killedAt: number;
  restartedAt: number;
  calls: number;
  failed: ProxyCallRecord[];
  /** From the kill to the end of the last failed call (0: none failed). */
  windowMs: number;
  /** Disconnects and reconnects logged in the window. */
  events: BusEvent[];
}

export interface NodeLossRig {
  stack: Stack;
  upstream: TestUpstreamApi;
  events: BusEvent[];
  dispose(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Two replicas of every service (gateways included) on a three-node NATS cluster, one API-key connection. */
export async function startNodeLossRig(options: { replicas?: number; serviceEnv?: Record<string, string> } = {}): Promise<NodeLossRig> {
  const replicas = options.replicas ?? 2;
  const upstream = await startUpstreamApi();
  const events: BusEvent[] = [];
  const stack = await startStack({
    natsCluster: true,
    gateways: replicas,
    replicas: Object.fromEntries(SERVICE_NAMES.filter((name) => name !== 'gateway').map((name) => [name, replicas])),
    readyTimeoutMs: 120_000,
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32', LOG_LEVEL: 'info', ...options.serviceEnv },
    serviceEnv: { gateway: { RATE_LIMIT_PER_MINUTE: '10000000' } },
    onOutput: (service, text) => {
      for (const line of text.split('\n')) {
        const match = /"message":"nats (disconnected|reconnected)"/.exec(line);
        if (!match) continue;
        const server = /"server":"([^"]*)"/.exec(line)?.[1] ?? '';
        events.push({ at: Date.now(), service, event: match[1] === 'disconnected' ? 'disconnect' : 'reconnect', server });
      }
    },
  });
  await seedApiKeyConnection(stack, 'api', 'conn-1', 'the-api-key');
  return {
    stack,
    upstream,
    events,
    dispose: async () => {
      await stack.dispose();
      await upstream.close();
    },
  };
}

/** `workers` callers per gateway, each sending its next call as soon as the last is answered. */
export function startProxyLoad(rig: NodeLossRig, workers = 2) {
  const calls: ProxyCallRecord[] = [];
  let running = true;
  let counter = 0;
  const one = async (gateway: number) => {
    const start = Date.now();
    const call: ProxyCallRecord = { gateway, start, end: start, status: 'error' };
    try {
      const response = await fetch(`${rig.stack.gateways[gateway]!.url}/proxy/echo/${counter++}`, {
        headers: { authorization: `Bearer ${rig.stack.bootstrapKey}`, 'connection-id': 'conn-1', 'provider-config-key': 'api' },
        signal: AbortSignal.timeout(20_000),
      });
      const text = await response.text();
      call.status = response.status;
      const code = response.status === 200 ? undefined : codeOf(text);
      if (code !== undefined) call.code = code;
    } catch (error) {
      call.code = (error as Error).name;
    }
    call.end = Date.now();
    calls.push(call);
  };
  const loops = rig.stack.gateways.flatMap((_, gateway) =>
    Array.from({ length: workers }, async () => {
      while (running) await one(gateway);
    }),
  );
  return {
    calls,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

/**
 * Which node to kill, and when: a node by index, at once; or the node leading the gateway's
 * rate-limit bucket (`KV_rate_limits`), `beforeMinuteMs` before the wall-clock minute turns, so
 * the limiter's next window opens while its bucket elects a new leader.
 */
export type NodeTarget = { node: number } | { rateLimitLeader: true; beforeMinuteMs: number };

async function chooseNode(rig: NodeLossRig, target: NodeTarget): Promise<number> {
  if ('node' in target) return target.node;
  const nc = await rig.stack.connectNats();
  try {
    const jsm = await jetstreamManager(nc);
    const leader = (await jsm.streams.info('KV_rate_limits')).cluster?.leader;
    const index = rig.stack.natsCluster!.nodes.findIndex((node) => node.name === leader);
    if (index < 0) throw new Error(`no node leads KV_rate_limits (${leader})`);
    const untilMinute = 60_000 - (Date.now() % 60_000) - target.beforeMinuteMs;
    await sleep(untilMinute < 0 ? untilMinute + 60_000 : untilMinute);
    return index;
  } finally {
    await nc.close();
  }
}

/** SIGKILLs each target in turn under the load, `downMs` away, then `quietMs` of steady load. */
export async function killEachNode(rig: NodeLossRig, options: { targets?: NodeTarget[]; downMs: number; quietMs: number; log?: (line: string) => void }): Promise<NodeLossWindow[]> {
  const log = options.log ?? (() => undefined);
  const load = startProxyLoad(rig);
  const marks: Array<{ node: number; killedAt: number; restartedAt: number; to: number }> = [];
  try {
    await sleep(options.quietMs);
    for (const target of options.targets ?? [{ node: 0 }, { node: 1 }, { node: 2 }]) {
      const node = await chooseNode(rig, target);
      const killedAt = Date.now();
      log(`${new Date(killedAt).toISOString()} SIGKILL NATS node ${node + 1}${'node' in target ? '' : ' (leads the rate-limit bucket)'}`);
      await rig.stack.natsCluster!.nodes[node]!.kill();
      await sleep(options.downMs);
      await rig.stack.natsCluster!.nodes[node]!.restart();
      const restartedAt = Date.now();
      await sleep(options.quietMs);
      marks.push({ node, killedAt, restartedAt, to: Date.now() });
    }
  } finally {
    await load.stop();
  }
  return marks.map(({ node, killedAt, restartedAt, to }) => {
    const calls = load.calls.filter((call) => call.end >= killedAt && call.end < to);
    const failed = calls.filter((call) => call.status !== 200);
    return {
      node,
      killedAt,
      restartedAt,
      calls: calls.length,
      failed,
      windowMs: failed.length === 0 ? 0 : Math.max(...failed.map((call) => call.end)) - killedAt,
      events: rig.events.filter((event) => event.at >= killedAt && event.at < to),
    };
  });
}

/** One block per node: the window, the failures by gateway, status and code, each failure and each bus event (ms after the kill). */
export function formatWindows(windows: NodeLossWindow[]): string {
  return windows
    .map((window) => {
      const at = (ms: number) => `+${ms - window.killedAt}`;
      const counts = window.failed.reduce<Record<string, number>>((all, call) => {
        const key = `gateway ${call.gateway + 1} ${call.status} ${call.code ?? ''}`.trim();
        all[key] = (all[key] ?? 0) + 1;
        return all;
      }, {});
      return [
        `NATS node ${window.node + 1}: ${window.failed.length}/${window.calls} calls failed, window ${(window.windowMs / 1000).toFixed(1)} s (restarted ${at(window.restartedAt)} ms)`,
        `  by gateway/status/code: ${JSON.stringify(counts)}`,
        `  failures (sent → answered, ms after the kill): ${window.failed.slice(0, 12).map((call) => `g${call.gateway + 1} ${at(call.start)}→${at(call.end)} ${call.status} ${call.code ?? ''}`.trim()).join('; ')}${window.failed.length > 12 ? ` … and ${window.failed.length - 12} more` : ''}`,
        `  bus events: ${window.events.map((event) => `${event.service} ${event.event} ${event.server} ${at(event.at)}`).join('; ')}`,
      ].join('\n');
    })
    .join('\n');
}

function codeOf(text: string): string | undefined {
  try {
    return (JSON.parse(text) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

/** `make chaos-nats`: the reproduction on its own, printing each node's window. */
if (import.meta.url === `file://${process.argv[1]}`) {
  const rig = await startNodeLossRig();
  try {
    const targets: NodeTarget[] = [{ node: 0 }, { node: 1 }, { node: 2 }, { rateLimitLeader: true, beforeMinuteMs: 500 }];
    const windows = await killEachNode(rig, { targets, downMs: 10_000, quietMs: 8000, log: (line) => process.stdout.write(`${line}\n`) });
    process.stdout.write(`${formatWindows(windows)}\n`);
  } finally {
    await rig.dispose();
  }
  process.exit(0);
}
