export {
  runMain,
  runService,
  type BaseConfig,
  type DatabaseConfig,
  type RunningService,
  type Runtime,
  type RuntimeWithoutDatabase,
  type ServiceDefinition,
  type ServiceDefinitionWithoutDatabase,
} from './run-service.js';
export { repeatEvery, type Repeating } from './repeat.js';
export { settledWithin } from './settled-within.js';
