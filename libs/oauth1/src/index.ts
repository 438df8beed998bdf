export {
  oauth1Header,
  percentEncode,
  signatureBaseString,
  type OAuth1Params,
  type OAuth1Request,
  type OAuth1SignatureMethod,
  type SignatureBaseStringInput,
} from './sign.js';
