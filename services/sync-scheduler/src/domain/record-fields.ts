import type { ModelField } from '@latchkey/contracts';

export interface FieldProblem {
  code: string;
  message: string;
  path: string;
}

const checks: Record<string, (value: unknown) => boolean> = {
  string: (value) => typeof value === 'string',
  number: (value) => typeof value === 'number' && Number.isFinite(value),
  integer: (value) => Number.isInteger(value),
  boolean: (value) => typeof value === 'boolean',
  date: (value) => (typeof value === 'string' && !Number.isNaN(Date.parse(value))) || (typeof value === 'number' && Number.isFinite(value)),
  object: (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
  array: (value) => Array.isArray(value),
};

/**
 * Checks a record against its model's declared fields: present unless optional (`optional`,
 * a `?` after the name or the type, or `| null` / `| undefined` in the type), and of the
 * declared type where it is one we know (`string`, `number`, `integer`, `boolean`, `date`,
 * `object`, `array`, `T[]`). Other types (unions, other models) are taken as declared. Fields
 * the model does not declare are kept as they are.
 */
export function checkFields(record: Record<string, unknown>, fields: readonly ModelField[]): FieldProblem[] {
  const problems: FieldProblem[] = [];
  for (const field of fields) {
    const name = field.name.endsWith('?') ? field.name.slice(0, -1) : field.name;
    let type = field.type.trim();
    const nullable = /\|\s*(null|undefined)\b/.test(type);
    type = type.replace(/\|\s*(null|undefined)\b/g, '').trim();
    const optional = field.optional === true || field.name.endsWith('?') || type.endsWith('?') || nullable;
    if (type.endsWith('?')) type = type.slice(0, -1);
    const value = record[name];
    if (value === undefined || value === null) {
      if (!optional) problems.push({ code: 'required', message: `${name} is required`, path: name });
      continue;
    }
    const check = type.endsWith('[]') ? checks['array'] : checks[type.toLowerCase()];
    if (check && !check(value)) problems.push({ code: 'invalid_type', message: `${name} must be ${type}`, path: name });
  }
  return problems;
}
