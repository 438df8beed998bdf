import type { ErrorItem } from './app-error.js';

/** The subset of a zod issue this library reads; kept structural so errors need no zod. */
interface IssueLike {
  code: string;
  message: string;
  path: ReadonlyArray<PropertyKey>;
}

/** Maps schema issues to error items with dotted paths (`tags.end_user_id`). */
export function toErrorItems(issues: ReadonlyArray<IssueLike>): ErrorItem[] {
  return issues.map((issue) => ({
    code: issue.code,
    message: issue.message,
    path: issue.path.map(String).join('.'),
  }));
}
