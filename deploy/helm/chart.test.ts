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

type Container = { ports: Array<{ name: string; containerPort: number }>; env: Array<{ name: string; value?: string }> };
const containerOf = (manifests: Manifest[], name: string) => (find(manifests, 'Deployment', name)?.spec as { template: { spec: { containers: Container[] } } }).template.spec.containers[0]!;

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

  test('lets only the gateway take connections, and only the proxy, vault and webhook router reach the internet', () => {
    const manifests = render('defaults.yaml');
    const policies = manifests.filter((manifest) => manifest.kind === 'NetworkPolicy');
    expect(policies).toHaveLength(6);
    for (const policy of policies) {
      const name = policy.metadata.name.replace(/^latchkey-/, '');
      const spec = policy.spec as { policyTypes: string[]; ingress: unknown[]; egress: Array<{ to: Array<{ ipBlock?: { cidr: string } }>; ports?: Array<{ port: number }> }> };
      expect(spec.policyTypes).toEqual(['Ingress', 'Egress']);
      expect(spec.ingress).toHaveLength(name === 'gateway' ? 1 : 0);
      const ports = spec.egress.flatMap((rule) => (rule.ports ?? []).map((port) => port.port));
      expect(ports).toEqual(expect.arrayContaining([53, 4222, 27017]));
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

  test('gives each service its own MongoDB credential with mongodb.perServiceUris: MONGODB_URI from its own key', () => {
    type Env = Array<{ name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }>;
    const deployments = render('existing-secret.yaml', '--set', 'mongodb.uri=', '--set', 'mongodb.perServiceUris=true').filter((manifest) => manifest.kind === 'Deployment');
    expect(deployments).toHaveLength(6);
    for (const deployment of deployments) {
      const service = deployment.metadata.name.replace(/^latchkey-/, '');
      const [container] = (deployment.spec as { template: { spec: { containers: Array<{ env: Env }> } } }).template.spec.containers;
      const uri = container?.env.find((entry) => entry.name === 'MONGODB_URI');
      expect(uri?.valueFrom?.secretKeyRef).toEqual({ name: 'latchkey-secrets', key: `MONGODB_URI_${service.toUpperCase().replace(/-/g, '_')}` });
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

  test('with mongodb.perServiceUris, needs the six per-service MongoDB URIs in the Secret instead of the shared one', () => {
    const services = ['gateway', 'credential-vault', 'proxy', 'sync-scheduler', 'action-runner', 'webhook-router'];
    const keys = services.map((name) => `MONGODB_URI_${name.toUpperCase().replace(/-/g, '_')}`);
    const uris = (names: string[]) => names.flatMap((key) => ['--set-string', `secrets.data.${key}=mongodb://${key.toLowerCase()}:password@mongodb:27017/?authSource=admin`]);
    const perService = ['--set', 'mongodb.uri=', '--set', 'mongodb.perServiceUris=true'];
    const secret = render('defaults.yaml', ...perService, ...uris(keys)).find((manifest) => manifest.kind === 'Secret') as unknown as { stringData: Record<string, string> };
    expect(Object.keys(secret.stringData)).toEqual(expect.arrayContaining(keys));
    expect(secret.stringData).not.toHaveProperty('MONGODB_URI');
    expect(() => render('defaults.yaml', ...perService, ...uris(keys.slice(0, -1)))).toThrow('secrets.data.MONGODB_URI_WEBHOOK_ROUTER is required');
    // mongodb.uri (set by default) would be given to every service, the per-service keys ignored.
    expect(() => render('existing-secret.yaml', '--set', 'mongodb.perServiceUris=true')).toThrow('mongodb.perServiceUris needs mongodb.uri empty');
  });

  test('keeps every Service name within Kubernetes\' 63 characters, the longest release name included', () => {
    // latchkey.fullname is cut to 40 characters; the longest name built on it must still fit.
    const services = render('everything.yaml', '--set', `fullnameOverride=${'f'.repeat(40)}`).filter((manifest) => manifest.kind === 'Service');
    expect(services).toHaveLength(7);
    expect(services.map((service) => service.metadata.name).filter((name) => name.length > 63)).toEqual([]);
  });
});
