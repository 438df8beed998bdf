export { createAddressPolicy, parseCidrList, type AddressPolicy, type AddressPolicyOptions, type AddressVerdict } from './address-policy.js';
export { UpstreamNotAllowedError, checkUrlHost, createSafeLookup, type ResolveAll } from './safe-lookup.js';
