import { describe, expect, it } from '@jest/globals';
import { AppError } from '@latchkey/errors';
import type { RecordedOperation } from './operation-recorder.js';
import { recordedHandler } from './recorded-handler.js';

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('recordedHandler', () => {
  const logged: RecordedOperation[] = [];
  const operations = { record: (operation: RecordedOperation) => void logged.push(operation) };
  const headers = { get: (name: string) => (name === 'traceparent' ? '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' : '') };

  it('logs a success with its scope and trace id, and answers unchanged', async () => {
    logged.length = 0;
    const handler = recordedHandler(operations, 'deploy', async (request: { env: string; secret: string }) => ({ key: `${request.env}-key` }), (request, answer) => ({
      environment_id: request.env,
      ...(answer ? { integration_id: answer.key } : {}),
    }));
    expect(await handler({ env: 'e1', secret: 'hunter2' }, { headers })).toEqual({ key: 'e1-key' });
    await settle();
    expect(logged).toEqual([
      expect.objectContaining({ type: 'deploy', environment_id: 'e1', integration_id: 'e1-key', status: 'success', trace_id: '4bf92f3577b34da6a3ce929d0e0e4736' }),
    ]);
    expect(JSON.stringify(logged)).not.toContain('hunter2');
  });

  it('logs a failure with the coded error, rethrows it, and skips calls it cannot place', async () => {
    logged.length = 0;
    const failing = recordedHandler(operations, 'connect', async (_request: { token: string }) => {
      throw new AppError('unknown_connect_session_token', 'Unknown session token');
    }, async (request) => (request.token === 'known' ? { environment_id: 'e2' } : undefined));
    await expect(failing({ token: 'known' })).rejects.toMatchObject({ code: 'unknown_connect_session_token' });
    await expect(failing({ token: 'other' })).rejects.toBeInstanceOf(AppError);
    await settle();
    expect(logged).toEqual([
      expect.objectContaining({ type: 'connect', environment_id: 'e2', status: 'failure', error: { code: 'unknown_connect_session_token', message: 'Unknown session token' } }),
    ]);
  });
});
