// ESLint checks the import boundaries only (lint/import-boundaries.js); tsc checks the rest.
import { importBoundaries } from './lint/import-boundaries.js';

export default importBoundaries(import.meta.dirname);
