import type { Scope } from '@latchkey/contracts';

/**
 * Who may read the provider catalog with an API key: whoever manages integrations (listing or
 * reading them, as the dry-run profile does) and a Connect UI backend, which shows providers to
 * end users. A connect-session token reads it too (the hosted Connect UI).
 */
export const CATALOG_READERS: readonly Scope[] = ['environment:integrations:list', 'environment:integrations:read', 'environment:connect_sessions:write'];
