import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { parseAllDocuments } from 'yaml';

/**
 * The chart as a cluster would receive it: rendered by helm and decoded strictly by our
 * validator (deploy/helm/validate). Both are built into .data/bin by `make chart-tools`, which CI
 * (.ci/run) runs first; where they are absent these tests are skipped, not failed.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const helm = `${root}.data/bin/helm`;
const validator = `${root}.data/bin/k8s-validate`;
const chart = `${root}deploy/helm/latchkey`;

interface Manifest {
  kind: string;
  metadata: { name: string };
  spec: Record<string, unknown>;
}

function validate(manifest: string) {
  const run = spawnSync(validator, [], { input: manifest, encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

function render(valuesFile: string, ...args: string[]): Manifest[] {
  const run = spawnSync(helm, ['template', 'latchkey', chart, '--namespace', 'latchkey', '-f', `${root}deploy/helm/check-values/${valuesFile}`, ...args], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(run.stderr);
  return parseAllDocuments(run.stdout)
    .map((document) => document.toJS() as Manifest | null)
    .filter((manifest): manifest is Manifest => manifest !== null);
}

const find = (manifests: Manifest[], kind: string, name: string) => manifests.find((manifest) => manifest.kind === kind && manifest.metadata.name === `latchkey-${name}`);

type Container = {
  ports: Array<{ name: string; containerPort: number }>;
  env: Array<{ name: string; value?: string }>;
  readinessProbe: { httpGet: { path: string } };
  resources: { requests?: { memory?: string } };
};
type PodSpec = { terminationGracePeriodSeconds: number; containers: Container[] };
const podOf = (manifests: Manifest[], name: string) => (find(manifests, 'Deployment', name)?.spec as { template: { spec: PodSpec } }).template.spec;
const containerOf = (manifests: Manifest[], name: string) => podOf(manifests, name).containers[0]!;
const envOf = (manifests: Manifest[], service: string, variable: string) => containerOf(manifests, service).env.filter((entry) => entry.name === variable);

const SERVICES = ['gateway', 'credential-vault', 'proxy', 'sync-scheduler', 'action-runner', 'webhook-router'];

const DEPLOYMENT = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: broken
spec:
  selector:
    matchLabels: { app: broken }
  template:
    metadata:
      labels: { app: broken }
    spec:
      containers:
        - name: app
          image: latchkey:0.1.0
`;

describe.each([existsSync(validator) ? 'built' : 'absent'])('the manifest validator (%s)', (state) => {
  const test = state === 'built' ? it : it.skip;

  test('accepts a well-formed object', () => {
    expect(validate(DEPLOYMENT)).toMatchObject({ status: 0, output: expect.stringContaining('1 objects decode strictly') });
  });

  test('fails on a misspelled field, naming it', () => {
    const result = validate(DEPLOYMENT.replace('  selector:', '  replica: 2\n  selector:'));
    expect(result.status).toBe(1);
    expect(result.output).toContain('unknown field "spec.replica"');
  });

  test('fails on a field given twice, a wrong type and an unknown kind', () => {
    expect(validate(DEPLOYMENT.replace('name: broken', 'name: broken\n  name: again')).output).toMatch(/"name" already set/);
    expect(validate(DEPLOYMENT.replace('name: app', 'name: [app]')).output).toMatch(/cannot unmarshal array/);
    expect(validate(DEPLOYMENT.replace('apiVersion: apps/v1', 'apiVersion: apps/v1beta1')).output).toContain('unknown kind apps/v1beta1 Deployment');
  });

  test('decodes the Prometheus Operator\'s ServiceMonitor strictly too', () => {
    const monitor = `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: scraped
spec:
  selector:
    matchLabels: { app: scraped }
  endpoints:
    - port: metrics
      path: /metrics
`;
    expect(validate(monitor)).toMatchObject({ status: 0 });
    expect(validate(monitor.replace('path: /metrics', 'pathh: /metrics')).output).toContain('unknown field');
  });
});

describe.each([existsSync(helm) && existsSync(validator) ? 'built' : 'absent'])('the rendered chart (helm %s)', (state) => {
  const test = state === 'built' ? it : it.skip;

  test('gives the gateway, proxy and action-runner an autoscaler that owns their replica count', () => {
    const manifests = render('defaults.yaml');
    for (const name of ['gateway', 'proxy', 'action-runner']) {
      expect(find(manifests, 'HorizontalPodAutoscaler', name)?.spec).toMatchObject({ scaleTargetRef: { kind: 'Deployment', name: `latchkey-${name}` }, minReplicas: expect.any(Number) });
      expect(find(manifests, 'Deployment', name)?.spec).not.toHaveProperty('replicas');
    }
    for (const name of ['credential-vault', 'sync-scheduler', 'webhook-router']) {
      expect(find(manifests, 'HorizontalPodAutoscaler', name)).toBeUndefined();
      expect(find(manifests, 'Deployment', name)?.spec['replicas']).toBe(2);
    }
    const fixed = render('hpa-off.yaml');
    expect(fixed.filter((manifest) => manifest.kind === 'HorizontalPodAutoscaler')).toEqual([]);
    expect(find(fixed, 'Deployment', 'proxy')?.spec['replicas']).toBe(3);
  });

  test('lets only the gateway take connections, only the proxy, vault and webhook router reach the internet, and every service but the proxy MongoDB', () => {
    const manifests = render('defaults.yaml');
    const policies = manifests.filter((manifest) => manifest.kind === 'NetworkPolicy');
    expect(policies).toHaveLength(6);
    for (const policy of policies) {
      const name = policy.metadata.name.replace(/^latchkey-/, '');
      const spec = policy.spec as { policyTypes: string[]; ingress: unknown[]; egress: Array<{ to: Array<{ ipBlock?: { cidr: string } }>; ports?: Array<{ port: number }> }> };
      expect(spec.policyTypes).toEqual(['Ingress', 'Egress']);
      expect(spec.ingress).toHaveLength(name === 'gateway' ? 1 : 0);
      const ports = spec.egress.flatMap((rule) => (rule.ports ?? []).map((port) => port.port));
      expect(ports).toEqual(expect.arrayContaining([53, 4222]));
      // The proxy stores nothing: it has no database to reach.
      expect(ports.includes(27017)).toBe(name !== 'proxy');
      const internet = spec.egress.some((rule) => rule.to.some((peer) => peer.ipBlock?.cidr === '0.0.0.0/0'));
      expect(internet).toBe(['proxy', 'credential-vault', 'webhook-router'].includes(name));
    }
    expect(render('network-policies-off.yaml').filter((manifest) => manifest.kind === 'NetworkPolicy')).toEqual([]);
  });

  test('passes nats.jetstreamReplicas to every service as JETSTREAM_REPLICAS', () => {
    const deployments = render('existing-secret.yaml', '--set', 'nats.jetstreamReplicas=3').filter((manifest) => manifest.kind === 'Deployment');
    expect(deployments).toHaveLength(6);
    for (const deployment of deployments) {
      const [container] = (deployment.spec as { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } }).template.spec.containers;
      expect(container?.env).toContainEqual({ name: 'JETSTREAM_REPLICAS', value: '3' });
    }
  });

  test('passes nats.jobsStreamMaxBytes to every service as JOBS_STREAM_MAX_BYTES, whole, 8 GiB by default', () => {
    for (const [args, bytes] of [[[], '8589934592'], [['--set', 'nats.jobsStreamMaxBytes=21474836480'], '21474836480']] as const) {
      const deployments = render('existing-secret.yaml', ...args).filter((manifest) => manifest.kind === 'Deployment');
      expect(deployments).toHaveLength(6);
      for (const deployment of deployments) {
        const [container] = (deployment.spec as { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } }).template.spec.containers;
        expect(container?.env).toContainEqual({ name: 'JOBS_STREAM_MAX_BYTES', value: bytes });
      }
    }
  });

  test('gives each service its own MongoDB credential with mongodb.perServiceUris: MONGODB_URI from its own key', () => {
    type Env = Array<{ name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }>;
    const deployments = render('existing-secret.yaml', '--set', 'mongodb.uri=', '--set', 'mongodb.perServiceUris=true').filter((manifest) => manifest.kind === 'Deployment');
    expect(deployments).toHaveLength(6);
    for (const deployment of deployments) {
      const service = deployment.metadata.name.replace(/^latchkey-/, '');
      const [container] = (deployment.spec as { template: { spec: { containers: Array<{ env: Env }> } } }).template.spec.containers;
      const uri = container?.env.find((entry) => entry.name === 'MONGODB_URI');
      if (service === 'proxy') expect(uri).toBeUndefined();
      else expect(uri?.valueFrom?.secretKeyRef).toEqual({ name: 'latchkey-secrets', key: `MONGODB_URI_${service.toUpperCase().replace(/-/g, '_')}` });
    }
  });

  test('gives the proxy, which stores nothing, no MongoDB URI or database', () => {
    for (const manifests of [render('existing-secret.yaml'), render('existing-secret.yaml', '--set', 'mongodb.uri=')]) {
      const names = containerOf(manifests, 'proxy').env.map((entry) => entry.name);
      expect(names).not.toContain('MONGODB_URI');
      expect(names).not.toContain('MONGODB_DB');
      expect(envOf(manifests, 'sync-scheduler', 'MONGODB_DB')).toEqual([{ name: 'MONGODB_DB', value: 'latchkey_sync_scheduler' }]);
    }
  });

  test('opens the gateway\'s metrics port, and renders a ServiceMonitor per service behind a value', () => {
    const defaults = render('defaults.yaml');
    expect(containerOf(defaults, 'gateway').env).toContainEqual({ name: 'METRICS_PORT', value: '9464' });
    expect(containerOf(defaults, 'gateway').ports).toContainEqual({ name: 'metrics', containerPort: 9464 });
    expect(defaults.filter((manifest) => manifest.kind === 'ServiceMonitor')).toEqual([]);
    expect(containerOf(render('hpa-off.yaml'), 'gateway').env).toContainEqual({ name: 'METRICS_PORT', value: '0' });

    const monitored = render('everything.yaml');
    const monitors = monitored.filter((manifest) => manifest.kind === 'ServiceMonitor');
    expect(monitors.map((monitor) => monitor.metadata.name).sort()).toEqual(
      ['action-runner', 'credential-vault', 'gateway', 'proxy', 'sync-scheduler', 'webhook-router'].map((name) => `latchkey-${name}`),
    );
    const gateway = monitors.find((monitor) => monitor.metadata.name === 'latchkey-gateway')!;
    expect(gateway.spec).toMatchObject({ endpoints: [{ port: 'metrics', path: '/metrics', interval: '15s' }], selector: { matchLabels: { 'latchkey.io/metrics': 'true' } } });
    // The headless Service a monitor selects points at the metrics port, never the API's.
    const service = monitored.find((manifest) => manifest.kind === 'Service' && manifest.metadata.name === 'latchkey-gateway-metrics')!;
    expect(service.spec).toMatchObject({ clusterIP: 'None', ports: [{ name: 'metrics', port: 9464, targetPort: 'metrics' }] });
    const vault = monitored.find((manifest) => manifest.kind === 'Service' && manifest.metadata.name === 'latchkey-credential-vault-metrics')!;
    expect(vault.spec).toMatchObject({ ports: [{ name: 'metrics', targetPort: 'http' }] });
    // Prometheus may reach the metrics ports through the NetworkPolicies.
    const policy = find(monitored, 'NetworkPolicy', 'proxy')!.spec as { ingress: Array<{ ports: Array<{ port: number }>; from: unknown[] }> };
    expect(policy.ingress).toContainEqual({ ports: [{ port: 3011, protocol: 'TCP' }], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }] });
  });

  test('trusts the ingress controller as the one proxy in front of the gateway, unless the operator says otherwise', () => {
    // Behind the Ingress every client would otherwise share the controller pod's address, and
    // one client's failed logins would lock out every other.
    const hops = (...args: string[]) => containerOf(render('existing-secret.yaml', ...args), 'gateway').env.filter((entry) => entry.name === 'TRUSTED_PROXY_HOPS');
    expect(hops('--set', 'ingress.enabled=true')).toEqual([{ name: 'TRUSTED_PROXY_HOPS', value: '1' }]);
    expect(hops()).toEqual([]);
    expect(hops('--set', 'ingress.enabled=true', '--set-string', 'services.gateway.env.TRUSTED_PROXY_HOPS=2')).toEqual([{ name: 'TRUSTED_PROXY_HOPS', value: '2' }]);
    expect(containerOf(render('existing-secret.yaml', '--set', 'ingress.enabled=true'), 'proxy').env.map((entry) => entry.name)).not.toContain('TRUSTED_PROXY_HOPS');
  });

  test('writes publicUrl into every service that builds public links, a service\'s own PUBLIC_URL winning', () => {
    const publicUrls = (manifests: Manifest[], name: string) => containerOf(manifests, name).env.filter((entry) => entry.name === 'PUBLIC_URL');
    const manifests = render('existing-secret.yaml', '--set', 'publicUrl=https://x.example');
    for (const name of ['gateway', 'credential-vault', 'action-runner']) {
      expect(publicUrls(manifests, name)).toEqual([{ name: 'PUBLIC_URL', value: 'https://x.example' }]);
    }
    for (const name of ['proxy', 'sync-scheduler', 'webhook-router']) expect(publicUrls(manifests, name)).toEqual([]);
    const overridden = render('existing-secret.yaml', '--set', 'publicUrl=https://x.example', '--set', 'services.action-runner.env.PUBLIC_URL=https://runner.example');
    expect(publicUrls(overridden, 'action-runner')).toEqual([{ name: 'PUBLIC_URL', value: 'https://runner.example' }]);
  });

  test('with mongodb.perServiceUris, needs the five per-service MongoDB URIs in the Secret instead of the shared one', () => {
    const keys = SERVICES.filter((name) => name !== 'proxy').map((name) => `MONGODB_URI_${name.toUpperCase().replace(/-/g, '_')}`);
    const uris = (names: string[]) => names.flatMap((key) => ['--set-string', `secrets.data.${key}=mongodb://${key.toLowerCase()}:password@mongodb:27017/?authSource=admin`]);
    const perService = ['--set', 'mongodb.uri=', '--set', 'mongodb.perServiceUris=true'];
    // The Secret the services read, not NATS's own with the passwords alone.
    const secret = render('defaults.yaml', ...perService, ...uris(keys)).find((manifest) => manifest.kind === 'Secret' && manifest.metadata.name === 'latchkey') as unknown as { stringData: Record<string, string> };
    expect(Object.keys(secret.stringData)).toEqual(expect.arrayContaining(keys));
    expect(secret.stringData).not.toHaveProperty('MONGODB_URI');
    expect(secret.stringData).not.toHaveProperty('MONGODB_URI_PROXY');
    expect(() => render('defaults.yaml', ...perService, ...uris(keys.slice(0, -1)))).toThrow('secrets.data.MONGODB_URI_WEBHOOK_ROUTER is required');
    // mongodb.uri (set by default) would be given to every service, the per-service keys ignored.
    expect(() => render('existing-secret.yaml', '--set', 'mongodb.perServiceUris=true')).toThrow('mongodb.perServiceUris needs mongodb.uri empty');
  });

  test('takes a gateway pod out of the Service only when that pod is not ready, not when another service is down', () => {
    // The gateway's /ready also asks every service for a ping: as its readiness probe, one
    // crash-looping service would take every gateway pod out of rotation, a full API outage.
    const manifests = render('defaults.yaml');
    expect(containerOf(manifests, 'gateway').readinessProbe.httpGet.path).toBe('/ready/self');
    for (const name of SERVICES.filter((service) => service !== 'gateway')) expect(containerOf(manifests, name).readinessProbe.httpGet.path).toBe('/ready');
  });

  test('gives the gateway, the action-runner and the proxy the drain their work needs, and each pod a grace period past its own drain', () => {
    const drain = (manifests: Manifest[], name: string) => ({
      timeout: envOf(manifests, name, 'SHUTDOWN_TIMEOUT_MS').map((entry) => entry.value),
      grace: podOf(manifests, name).terminationGracePeriodSeconds,
    });
    const defaults = render('defaults.yaml');
    // An async action still running 3 s before the drain ends is handed back and runs again.
    expect(drain(defaults, 'action-runner')).toEqual({ timeout: ['70000'], grace: 75 });
    expect(drain(defaults, 'proxy')).toEqual({ timeout: ['45000'], grace: 50 });
    expect(drain(defaults, 'sync-scheduler')).toEqual({ timeout: ['10000'], grace: 15 });
    // A synchronous action is waited for up to FUNCTION_TIMEOUT_MS + 10 s; the gateway's preStop pause comes on top.
    expect(drain(defaults, 'gateway')).toEqual({ timeout: ['75000'], grace: 85 });

    const changed = render('defaults.yaml', '--set', 'shutdownTimeoutMs=20000', '--set', 'services.webhook-router.shutdownTimeoutMs=30500');
    expect(drain(changed, 'credential-vault')).toEqual({ timeout: ['20000'], grace: 25 });
    expect(drain(changed, 'webhook-router')).toEqual({ timeout: ['30500'], grace: 36 });
    expect(drain(changed, 'action-runner')).toEqual({ timeout: ['70000'], grace: 75 });
  });

  test('refuses a service setting that repeats a variable the chart sets, instead of writing it twice', () => {
    expect(() => render('existing-secret.yaml', '--set-string', 'services.proxy.env.SHUTDOWN_TIMEOUT_MS=5000')).toThrow(
      'services.proxy: SHUTDOWN_TIMEOUT_MS is set by the chart (shutdownTimeoutMs, services.proxy.shutdownTimeoutMs) and by services.proxy.env',
    );
    expect(() => render('existing-secret.yaml', '--set', 'services.gateway.extraEnv[0].name=LOG_LEVEL', '--set', 'services.gateway.extraEnv[0].value=debug')).toThrow(
      'services.gateway: LOG_LEVEL is set by the chart (logLevel) and by services.gateway.extraEnv',
    );
    expect(() => render('existing-secret.yaml', '--set-string', 'services.sync-scheduler.env.NATS_PASSWORD=x')).toThrow(
      'services.sync-scheduler: NATS_PASSWORD is set by services.sync-scheduler.env and by services.sync-scheduler.secretEnv',
    );
    // The variables a service's own value may replace are left to it, from env or extraEnv alike.
    const replaced = render('existing-secret.yaml', '--set', 'services.credential-vault.extraEnv[0].name=PUBLIC_URL', '--set', 'services.credential-vault.extraEnv[0].value=https://vault.example');
    expect(envOf(replaced, 'credential-vault', 'PUBLIC_URL')).toEqual([{ name: 'PUBLIC_URL', value: 'https://vault.example' }]);
  });

  test('writes the settings several services must agree on into every service that reads them, from one value each', () => {
    const shared = { FUNCTION_TIMEOUT_MS: ['gateway', 'action-runner'], PROXY_TIMEOUT_MS: ['gateway', 'proxy', 'action-runner'], PROXY_ALLOW_CIDRS: ['proxy', 'credential-vault'] };
    const expectShared = (manifests: Manifest[], values: Record<keyof typeof shared, string>) => {
      for (const [variable, readers] of Object.entries(shared)) {
        for (const name of SERVICES) {
          expect({ name, entries: envOf(manifests, name, variable) }).toEqual({ name, entries: readers.includes(name) ? [{ name: variable, value: values[variable as keyof typeof shared] }] : [] });
        }
      }
    };
    expectShared(render('existing-secret.yaml'), { FUNCTION_TIMEOUT_MS: '60000', PROXY_TIMEOUT_MS: '30000', PROXY_ALLOW_CIDRS: '' });
    expectShared(render('existing-secret.yaml', '--set', 'functionTimeoutMs=90000', '--set', 'proxyTimeoutMs=20000', '--set-string', 'proxyAllowCidrs=10.30.0.0/16\\,127.0.0.1/32'), {
      FUNCTION_TIMEOUT_MS: '90000',
      PROXY_TIMEOUT_MS: '20000',
      PROXY_ALLOW_CIDRS: '10.30.0.0/16,127.0.0.1/32',
    });
    // Set on one service only, it would disagree with the others: refused, naming the value to use.
    expect(() => render('existing-secret.yaml', '--set-string', 'services.action-runner.env.FUNCTION_TIMEOUT_MS=90000')).toThrow('FUNCTION_TIMEOUT_MS is set by the chart (functionTimeoutMs)');
    expect(() => render('existing-secret.yaml', '--set', 'services.proxy.extraEnv[0].name=PROXY_ALLOW_CIDRS', '--set', 'services.proxy.extraEnv[0].value=10.0.0.0/8')).toThrow(
      'PROXY_ALLOW_CIDRS is set by the chart (proxyAllowCidrs)',
    );
  });

  test('publishes the NATS authorization and a Secret of the six NATS passwords only, in the namespace NATS runs in', () => {
    const natsObjects = (manifests: Manifest[]) => manifests.filter((manifest) => ['latchkey-nats-auth', 'latchkey-nats-passwords'].includes(manifest.metadata.name)) as unknown as Array<{
      kind: string;
      metadata: { name: string; namespace: string };
      stringData?: Record<string, string>;
    }>;
    const passwords = SERVICES.map((name) => `LATCHKEY_NATS_PASSWORD_${name.toUpperCase().replace(/-/g, '_')}`);
    const placed = (objects: ReturnType<typeof natsObjects>) => objects.map((object) => `${object.kind} ${object.metadata.namespace}`).sort();
    const here = natsObjects(render('defaults.yaml'));
    expect(placed(here)).toEqual(['ConfigMap latchkey', 'Secret latchkey']);
    // NATS pods never see the Secret with the encryption keys and the admin token.
    expect(Object.keys(here.find((object) => object.kind === 'Secret')!.stringData!).sort()).toEqual([...passwords].sort());
    expect(placed(natsObjects(render('defaults.yaml', '--set', 'nats.namespace=nats')))).toEqual(['ConfigMap nats', 'Secret nats']);
    // With a Secret of their own, operators create NATS's one too (README.md): the chart writes no passwords.
    expect(natsObjects(render('existing-secret.yaml', '--set', 'nats.namespace=nats')).map((object) => object.kind)).toEqual(['ConfigMap']);
  });

  test('gives ingress-nginx timeouts past the gateway\'s longest wait and no body limit of its own, the operator\'s annotations winning', () => {
    type Ingress = { metadata: { annotations?: Record<string, string> } };
    const annotations = (...args: string[]) => (render('existing-secret.yaml', '--set', 'ingress.enabled=true', ...args).find((manifest) => manifest.kind === 'Ingress') as unknown as Ingress).metadata.annotations ?? {};
    const nginx = (key: string) => `nginx.ingress.kubernetes.io/${key}`;
    // A proxied call with 10 retries: (30 s + 10 s) × 11 + 5 s = 445 s, and 5 s for the answer to come.
    expect(annotations()).toEqual({ [nginx('proxy-read-timeout')]: '450', [nginx('proxy-send-timeout')]: '450', [nginx('proxy-body-size')]: '0', [nginx('proxy-request-buffering')]: 'off' });
    expect(annotations('--set', 'ingress.className=nginx', '--set', 'proxyTimeoutMs=5000', '--set', 'functionTimeoutMs=300000')).toMatchObject({ [nginx('proxy-read-timeout')]: '345' });
    expect(annotations('--set-string', `ingress.annotations.${nginx('proxy-body-size').replace(/\./g, '\\.')}=50m`)).toMatchObject({ [nginx('proxy-body-size')]: '50m', [nginx('proxy-read-timeout')]: '450' });
    expect(annotations('--set', 'ingress.className=traefik')).toEqual({});
  });

  test('refuses a ServiceMonitor that the NetworkPolicies would keep from every scrape target', () => {
    expect(() => render('existing-secret.yaml', '--set', 'metrics.serviceMonitor.enabled=true')).toThrow('metrics.serviceMonitor.enabled with networkPolicy.enabled needs metrics.from');
    expect(render('network-policies-off.yaml', '--set', 'metrics.serviceMonitor.enabled=true').filter((manifest) => manifest.kind === 'ServiceMonitor')).toHaveLength(6);
  });

  test('takes publicUrl from the Ingress\'s host when it is not set, https when the Ingress has TLS for that host', () => {
    const publicUrl = (...args: string[]) => envOf(render('existing-secret.yaml', ...args), 'gateway', 'PUBLIC_URL').map((entry) => entry.value);
    expect(publicUrl()).toEqual(['http://localhost:3003']);
    const ingress = ['--set', 'ingress.enabled=true', '--set', 'ingress.host=api.example.com'];
    expect(publicUrl(...ingress)).toEqual(['http://api.example.com']);
    expect(publicUrl(...ingress, '--set', 'ingress.tls[0].secretName=tls', '--set', 'ingress.tls[0].hosts[0]=api.example.com')).toEqual(['https://api.example.com']);
    expect(publicUrl(...ingress, '--set', 'ingress.tls[0].secretName=tls', '--set', 'ingress.tls[0].hosts[0]=other.example.com')).toEqual(['http://api.example.com']);
    expect(publicUrl(...ingress, '--set', 'publicUrl=https://latchkey.example.com')).toEqual(['https://latchkey.example.com']);
  });

  test('keeps every Service name within Kubernetes\' 63 characters, the longest release name included', () => {
    // latchkey.fullname is cut to 40 characters; the longest name built on it must still fit.
    const services = render('everything.yaml', '--set', `fullnameOverride=${'f'.repeat(40)}`).filter((manifest) => manifest.kind === 'Service');
    expect(services).toHaveLength(7);
    expect(services.map((service) => service.metadata.name).filter((name) => name.length > 63)).toEqual([]);
  });
});
