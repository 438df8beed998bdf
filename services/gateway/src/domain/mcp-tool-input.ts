/**
 * How an action's input is offered as an MCP tool's. MCP (and the official SDK client, which
 * checks every tool of a `tools/list` answer) requires an input schema whose root is
 * `type: "object"`, while an action may take any JSON value (`z.string()`, an array, a union).
 * An action's JSON Schema is therefore offered:
 * - as it is when its root is an object;
 * - with `type: "object"` added at its root when it is a union of objects (`oneOf`/`anyOf`,
 *   each branch an object) or an intersection with an object: the same values, typed;
 * - otherwise wrapped as the one required property `input` of an object: a client sends
 *   `{"input": <value>}` and the action receives `<value>`.
 */

type JsonSchema = Record<string, unknown>;

/** The property a wrapped input travels in. */
const WRAPPED = 'input';
/** What a tool of an action that declares no input schema takes: any object. */
const ANY_OBJECT: JsonSchema = { type: 'object' };

export interface ToolInput {
  /** The schema `tools/list` shows, its root an object. */
  inputSchema: JsonSchema;
  /** Whether the tool's arguments carry the action's input as `input`. */
  wrapped: boolean;
}

/** How many `$ref`s deep a root is followed before it counts as not an object (a loop). */
const MAX_REF_DEPTH = 8;

const isSchema = (value: unknown): value is JsonSchema => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The schema a local `$ref` (`#/$defs/<name>`, `#/definitions/<name>`) names in `root`, if any. */
function resolveLocal(root: JsonSchema, ref: string): JsonSchema | undefined {
  const [, keyword, name] = /^#\/(\$defs|definitions)\/([^/~%]+)$/.exec(ref) ?? [];
  if (keyword === undefined || name === undefined) return undefined;
  const definitions = root[keyword];
  const target = isSchema(definitions) ? definitions[name] : undefined;
  return isSchema(target) ? target : undefined;
}

/** Whether every value `schema` accepts is an object; `depth` bounds references that loop. */
function acceptsObjectsOnly(root: JsonSchema, schema: JsonSchema, depth = 0): boolean {
  if (depth > MAX_REF_DEPTH) return false;
  if (schema['type'] === 'object') return true;
  if (schema['type'] !== undefined) return false;
  const branch = (candidate: unknown) => isSchema(candidate) && acceptsObjectsOnly(root, candidate, depth + 1);
  if (typeof schema['$ref'] === 'string') {
    const target = resolveLocal(root, schema['$ref']);
    return target !== undefined && branch(target);
  }
  for (const keyword of ['oneOf', 'anyOf'] as const) {
    const branches = schema[keyword];
    if (Array.isArray(branches) && branches.length > 0 && branches.every(branch)) return true;
  }
  const all = schema['allOf'];
  return Array.isArray(all) && all.some(branch);
}

/** `schema` as the one required property `input` of an object, its root keywords left at the root. */
function wrap(schema: JsonSchema): JsonSchema {
  // `$ref`s inside point at the document's root (`#/$defs/...`): the definitions stay there.
  const { $schema, $defs, definitions, ...inner } = schema;
  return {
    ...($schema === undefined ? {} : { $schema }),
    type: 'object',
    properties: { [WRAPPED]: inner },
    required: [WRAPPED],
    additionalProperties: false,
    ...($defs === undefined ? {} : { $defs }),
    ...(definitions === undefined ? {} : { definitions }),
  };
}

/** The tool input of an action with this JSON Schema (none: any object). */
export function toolInputOf(schema: JsonSchema | undefined): ToolInput {
  if (schema === undefined) return { inputSchema: ANY_OBJECT, wrapped: false };
  if (schema['type'] === 'object') return { inputSchema: schema, wrapped: false };
  if (acceptsObjectsOnly(schema, schema)) return { inputSchema: { ...schema, type: 'object' }, wrapped: false };
  return { inputSchema: wrap(schema), wrapped: true };
}

/** The action's input from a `tools/call`'s arguments. */
export function actionInputOf(args: Record<string, unknown> | undefined, wrapped: boolean): unknown {
  return wrapped ? args?.[WRAPPED] : args;
}
