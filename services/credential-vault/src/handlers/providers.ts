import type { RequestOf, ResponseOf, vaultContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';

type PublicProvider = ResponseOf<typeof vaultContracts.getProvider>;

export interface CatalogView {
  list(search?: string): PublicProvider[];
  get(name: string): PublicProvider | undefined;
}

/** `vault.providers.list`: the catalog, optionally searched by name, display name or category. */
export function listProvidersHandler(catalog: CatalogView) {
  return ({ search }: RequestOf<typeof vaultContracts.listProviders>) => catalog.list(search);
}

/** `vault.providers.get`: one provider, or `unknown_provider`. */
export function getProviderHandler(catalog: CatalogView) {
  return ({ name }: RequestOf<typeof vaultContracts.getProvider>) => {
    const provider = catalog.get(name);
    if (!provider) throw new AppError('unknown_provider', `No provider named "${name}" in the catalog`);
    return provider;
  };
}
