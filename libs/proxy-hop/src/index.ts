export { callProxy, proxyExchange, type ProxyAnswer, type ProxyCall, type ProxyResponse } from './call-proxy.js';
export { ANSWER, KEEPALIVE, answerFrame, frameBatcher, readFrames, type Frame, type FrameBatcher } from './frames.js';
