export { ALLOW_CIDRS_HINT, createAddressPolicy, parseCidrList, type AddressPolicy, type AddressPolicyOptions, type AddressVerdict } from './address-policy.js';
export { UpstreamNotAllowedError, checkUrlHost, createSafeLookup, type ResolveAll } from './safe-lookup.js';
export { OutboundRequestError, createHttpClient, type HttpClient, type HttpClientOptions, type OutboundRequest, type OutboundResponse } from './http-client.js';
