/**
 * How deep any JSON the API takes may nest: far past what a provider's data or a JSON Schema
 * needs, and well within what `JSON.stringify` writes (it overflows its stack some thousands of
 * levels down, while `JSON.parse` takes any depth) and MongoDB's 100 levels.
 */
export const JSON_MAX_DEPTH = 64;

/**
 * The path to the first array or object nested deeper than `maxDepth` levels below `value`, or
 * undefined when none is. Walked without recursion: a value nested thousands deep is one answer,
 * not a stack overflow.
 */
export function pathTooDeep(value: unknown, maxDepth = JSON_MAX_DEPTH): Array<string | number> | undefined {
  const pending: Array<{ node: unknown; path: Array<string | number> }> = [{ node: value, path: [] }];
  while (pending.length > 0) {
    const { node, path } = pending.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (path.length > maxDepth) return path;
    if (Array.isArray(node)) node.forEach((item, index) => pending.push({ node: item, path: [...path, index] }));
    else for (const [key, item] of Object.entries(node)) pending.push({ node: item, path: [...path, key] });
  }
  return undefined;
}
