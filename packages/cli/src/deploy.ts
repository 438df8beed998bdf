import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { FunctionDescription } from '@latchkey/functions';
import { bundleFunction, type Diagnostic } from './bundle-function.js';
import { describeBundle } from './describe-bundle.js';

export interface DeployOptions {
  /** A directory with one folder per integration (its unique key), each holding function files. */
  dir: string;
  host: string;
  apiKey: string;
  /** Progress lines; silent by default. */
  log?: (line: string) => void;
}

export interface DeployedIntegration {
  provider_config_key: string;
  version: number;
  functions: Array<{ name: string; type: string }>;
}

export class DeployError extends Error {
  constructor(
    message: string,
    readonly diagnostics: Diagnostic[] = [],
  ) {
    super(message);
    this.name = 'DeployError';
  }
}

const FUNCTION_FILE = /^(?!.*\.(test|spec|d)\.[cm]?[jt]s$).*\.[cm]?[jt]s$/;

/** The function files of each integration folder, in a stable order. */
export function findFunctions(dir: string): Map<string, string[]> {
  const root = resolve(dir);
  const found = new Map<string, string[]>();
  for (const integration of readdirSync(root).sort()) {
    const folder = join(root, integration);
    if (integration.startsWith('.') || integration === 'node_modules' || !statSync(folder).isDirectory()) continue;
    const files = readdirSync(folder)
      .filter((name) => FUNCTION_FILE.test(name) && statSync(join(folder, name)).isFile())
      .sort()
      .map((name) => join(folder, name));
    if (files.length > 0) found.set(integration, files);
  }
  return found;
}

/** The answer's JSON object, or undefined when it is not one (whatever its status). */
function readJson(response: Response, text: string): Record<string, any> | undefined {
  if (!/^application\/([\w.-]+\+)?json\b/i.test(response.headers.get('content-type') ?? '')) return undefined;
  try {
    const body: unknown = JSON.parse(text);
    return body !== null && typeof body === 'object' ? (body as Record<string, any>) : undefined;
  } catch {
    return undefined;
  }
}

/** Enough of an error page to recognise it, on one line: no markup, no control characters. */
function excerpt(text: string): string {
  const flat = text.replace(/<[^>]*>/g, ' ').replace(/[\s\p{Cc}]+/gu, ' ').trim();
  return flat.length > 200 ? `${flat.slice(0, 200)}…` : flat || '(empty)';
}

/**
 * Bundles every function under `dir` and deploys each integration's set as its next version
 * (`POST /functions/deployments`). Nothing is uploaded unless every file bundles and describes.
 */
export async function deployDirectory(options: DeployOptions): Promise<DeployedIntegration[]> {
  const log = options.log ?? (() => undefined);
  if (!existsSync(options.dir) || !statSync(options.dir).isDirectory()) throw new DeployError(`no directory ${options.dir}: expected <dir>/<integration>/<function>.ts`);
  const integrations = findFunctions(options.dir);
  if (integrations.size === 0) throw new DeployError(`no functions under ${options.dir}: expected <dir>/<integration>/<function>.ts`);
  const uploads: Array<{ provider_config_key: string; functions: Array<{ description: FunctionDescription; bundle: string }> }> = [];
  for (const [integration, files] of integrations) {
    const functions = [];
    for (const file of files) {
      const result = await bundleFunction({ entry: file });
      if (!result.ok) throw new DeployError(`${file} does not compile`, result.diagnostics);
      let description: FunctionDescription;
      try {
        description = describeBundle(result.bundle, file);
      } catch (error) {
        throw new DeployError(`${file}: ${error instanceof Error ? error.message : String(error)}`);
      }
      log(`${integration}: ${description.type} ${description.name} (${Buffer.byteLength(result.bundle)} bytes)`);
      functions.push({ description, bundle: result.bundle });
    }
    uploads.push({ provider_config_key: integration, functions });
  }
  const deployed: DeployedIntegration[] = [];
  for (const upload of uploads) {
    let response: Response;
    try {
      response = await fetch(`${options.host.replace(/\/+$/, '')}/functions/deployments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(upload),
      });
    } catch (error) {
      const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
      throw new DeployError(`cannot reach Latchkey at ${options.host}: ${cause}`);
    }
    const text = await response.text();
    const body = readJson(response, text);
    if (!body) {
      // Not Latchkey's answer: an ingress or load balancer in front sends its own error pages.
      throw new DeployError(`deploying ${upload.provider_config_key} failed: ${response.status} ${response.statusText}, not a JSON answer: ${excerpt(text)}`);
    }
    if (!response.ok) {
      const error = body['error'] as { code?: string; message?: string; errors?: Array<{ path: string; message: string }> } | undefined;
      const details = (error?.errors ?? []).map((item) => ({ severity: 'error' as const, message: `${item.path}: ${item.message}` }));
      throw new DeployError(`deploying ${upload.provider_config_key} failed: ${response.status} ${error?.code ?? ''} ${error?.message ?? excerpt(text)}`.trim(), details);
    }
    const result = body['data'] as DeployedIntegration;
    log(`${result.provider_config_key}: version ${result.version} deployed`);
    deployed.push(result);
  }
  return deployed;
}
