export { runMain, runService, type BaseConfig, type RunningService, type Runtime, type ServiceDefinition } from './run-service.js';
