import { defineRoute } from '../../http/define-route.js';
import { environmentView } from '../../domain/environment-view.js';

export const listEnvironments = defineRoute({
  method: 'get',
  path: '/admin/environments',
  auth: 'admin',
  scope: null,
  doc: { summary: 'List environments' },
  schemas: {},
  handler: async ({ deps }) => ({ body: { data: (await deps.environments.list()).map(environmentView) } }),
});
