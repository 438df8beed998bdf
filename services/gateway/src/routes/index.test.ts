import { describe, expect, it } from '@jest/globals';
import { isScope } from '@latchkey/contracts';
import { bareRoutes, routes } from './index.js';

describe('routes', () => {
  it('each declare who may call them, and API-key routes a scope from the closed list', () => {
    for (const route of routes) {
      expect(['api_key', 'api_key_or_session', 'connect_session', 'admin', 'public']).toContain(route.auth);
      if (route.auth === 'api_key') expect(isScope(route.scope)).toBe(true);
      else if (route.auth === 'api_key_or_session') {
        expect(route.scope.length).toBeGreaterThan(0);
        for (const scope of route.scope) expect(isScope(scope)).toBe(true);
      } else expect(route.scope).toBeNull();
    }
  });

  it('served before express are API-key routes with a scope from the closed list, or public', () => {
    for (const route of bareRoutes) {
      if (route.auth === 'public') expect(route.scope).toBeNull();
      else expect(isScope(route.scope)).toBe(true);
    }
  });

  it('served before express take no prefix of an express route', () => {
    for (const route of bareRoutes) expect(routes.filter((other) => other.path === route.prefix || other.path.startsWith(`${route.prefix}/`))).toEqual([]);
  });

  it('keep the operator API under /admin and nothing else there', () => {
    for (const route of routes) expect(route.path.startsWith('/admin')).toBe(route.auth === 'admin');
  });

  it('are unique by method and path', () => {
    const keys = routes.map((route) => `${route.method} ${route.path}`);
    expect(new Set(keys).size).toBe(keys.length);
  });
});
