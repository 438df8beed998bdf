/** An operator log's page as the repositories read it: `before` (a time from the last page) as a Date. */
export function logPageOf(request: { limit: number; before?: string | undefined }): { limit: number; before?: Date } {
  return { limit: request.limit, ...(request.before === undefined ? {} : { before: new Date(request.before) }) };
}
