import { z } from 'zod';

/** Booleans in query strings arrive as the strings `true` / `false`. */
export const queryBoolean = z
  .enum(['true', 'false'])
  .optional()
  .transform((value) => value === 'true');

/** A list given as repeated parameters, a comma list, or both: `a,b` or `x=a&x=b`. */
export const queryList = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .transform((value) =>
    (Array.isArray(value) ? value : value === undefined ? [] : [value])
      .flatMap((item) => item.split(','))
      .map((item) => item.trim())
      .filter(Boolean),
  );
