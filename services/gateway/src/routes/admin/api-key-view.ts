import type { ApiKeyDoc } from '../../db/api-key-model.js';

/** A key as the operator sees it in lists: never its secret or digest. */
export function apiKeyView(key: ApiKeyDoc) {
  return {
    id: key._id,
    display_name: key.display_name,
    scopes: key.scopes,
    hint: key.hint,
    created_at: key.created_at.toISOString(),
    last_used_at: key.last_used_at ? key.last_used_at.toISOString() : null,
  };
}
