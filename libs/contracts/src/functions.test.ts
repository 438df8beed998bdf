import { describe, expect, it } from '@jest/globals';
import { deploymentBody } from './index.js';

const syncWithModel = (model: string) => ({
  provider_config_key: 'crm',
  functions: [
    {
      description: { type: 'sync', name: 'tickets', frequency: 'every hour', models: [{ name: model, fields: [{ name: 'id', type: 'string' }] }], webhook_subscriptions: [] },
      bundle: 'module.exports = {}',
    },
  ],
});

describe('deploymentBody', () => {
  it('takes a sync whose models the records store can hold', () => {
    expect(deploymentBody.safeParse(syncWithModel('Ticket_2')).success).toBe(true);
  });

  it('refuses, at deploy, a model name the records store refuses: its sync could never save a record', () => {
    for (const name of ['github-issue', 'a.b', '$where', '2fa', 'M'.repeat(65)]) {
      const parsed = deploymentBody.safeParse(syncWithModel(name));
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.path).toEqual(['functions', 0, 'description', 'models', 0, 'name']);
    }
  });
});

describe('deploymentBody, one model to a sync', () => {
  const sync = (name: string, models: string[]) => ({
    description: { type: 'sync', name, frequency: 'every hour', models: models.map((model) => ({ name: model, fields: [{ name: 'id', type: 'string' }] })), webhook_subscriptions: [] },
    bundle: 'module.exports = {}',
  });

  it('refuses a model two syncs declare: they would overwrite and clear each other\'s records', () => {
    const parsed = deploymentBody.safeParse({ provider_config_key: 'crm', functions: [sync('contacts', ['Contact']), sync('people', ['Person', 'Contact'])] });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]).toMatchObject({ path: ['functions', 1, 'description', 'models', 1, 'name'], message: expect.stringContaining('declared by syncs contacts and people') });
  });

  it('takes models of different names across syncs', () => {
    expect(deploymentBody.safeParse({ provider_config_key: 'crm', functions: [sync('contacts', ['Contact']), sync('people', ['Person'])] }).success).toBe(true);
  });
});
