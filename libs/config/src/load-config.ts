import { z } from 'zod';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
  }
}

type Env = Record<string, string | undefined>;

/**
 * Validates `env` against `schema` and returns the typed result, or throws a ConfigError that
 * lists every problem at once (not the first one only). Empty strings count as unset, so
 * `FOO= make up` behaves like leaving FOO out.
 */
export function parseConfig<S extends z.ZodType>(schema: S, env: Env = process.env): z.infer<S> {
  const cleaned: Env = {};
  for (const [key, value] of Object.entries(env)) {
    if (value !== undefined && value !== '') cleaned[key] = value;
  }
  const result = schema.safeParse(cleaned);
  if (result.success) return result.data;
  throw new ConfigError(
    result.error.issues.map((issue) => {
      const name = issue.path.map(String).join('.') || '(environment)';
      return `${name}: ${issue.message}`;
    }),
  );
}

/** For a service's `config.ts`: parse, or print every problem and exit non-zero. */
export function loadConfig<S extends z.ZodType>(schema: S, env: Env = process.env): z.infer<S> {
  try {
    return parseConfig(schema, env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
