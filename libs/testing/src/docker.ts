import { existsSync } from 'node:fs';

let answer: Promise<boolean> | undefined;

/**
 * Whether a Docker engine answers, so tests can run MongoDB 7 and NATS in containers.
 * `LATCHKEY_TEST_DOCKER=0` forces the native servers; `=1` insists on Docker.
 */
export function dockerAvailable(): Promise<boolean> {
  answer ??= (async () => {
    const forced = process.env['LATCHKEY_TEST_DOCKER'];
    if (forced === '0') return false;
    if (forced !== '1' && !process.env['DOCKER_HOST'] && !existsSync('/var/run/docker.sock')) return false;
    try {
      const { getContainerRuntimeClient } = await import('testcontainers');
      const client = await getContainerRuntimeClient();
      return Boolean(client.info.containerRuntime);
    } catch {
      if (forced === '1') throw new Error('LATCHKEY_TEST_DOCKER=1 but no Docker engine answers');
      return false;
    }
  })();
  return answer;
}
