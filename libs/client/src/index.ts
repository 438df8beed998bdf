export { Latchkey, type EnvironmentVariable, type LatchkeyOptions } from './client.js';
export { LatchkeyError, type LatchkeyErrorItem } from './errors.js';
