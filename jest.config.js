/**
 * Three tiers (HOUSE-STYLE.md): unit tests beside the code with no I/O, integration tests
 * beside the code against real NATS and a MongoDB-wire server, e2e against the running stack.
 * ESM throughout (got is ESM-only): swc strips types, Node runs the modules.
 */
const swc = [
  '@swc/jest',
  {
    jsc: { parser: { syntax: 'typescript' }, target: 'es2023' },
    module: { type: 'es6' },
  },
];

const common = {
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper: {
    // Workspace libraries and packages resolve to their sources, so tests need no build step.
    '^@latchkey/(client|functions|cli)$': '<rootDir>/packages/$1/src/index.ts',
    '^@latchkey/([a-z-]+)$': '<rootDir>/libs/$1/src/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  testEnvironment: 'node',
};

export default {
  // Real servers and browsers on a shared two-core machine: jest's 5 s default is a latency bet,
  // not a check; a test that means a deadline asserts it itself. Global, not per project: jest
  // reads a test's timeout from the run's own configuration only (a project's is ignored).
  testTimeout: 30_000,
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: ['<rootDir>/{libs,packages,services}/*/src/**/*.test.ts', '<rootDir>/{deploy,lint}/**/*.test.ts', '<rootDir>/docs/*.test.ts'],
      testPathIgnorePatterns: ['\\.int\\.test\\.ts$'],
    },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/{libs,packages,services}/*/src/**/*.int.test.ts'],
      slowTestThreshold: 30,
    },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/e2e/**/*.e2e.test.ts'],
      slowTestThreshold: 60,
    },
  ],
};
