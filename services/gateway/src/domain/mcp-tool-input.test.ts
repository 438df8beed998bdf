import { describe, expect, it } from '@jest/globals';
import { actionInputOf, toolInputOf } from './mcp-tool-input.js';

const DRAFT = 'https://json-schema.org/draft/2020-12/schema';

describe('MCP tool input', () => {
  it('takes any object for an action without a schema, and an object schema as it is', () => {
    expect(toolInputOf(undefined)).toEqual({ inputSchema: { type: 'object' }, wrapped: false });
    const object = { $schema: DRAFT, type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
    expect(toolInputOf(object)).toEqual({ inputSchema: object, wrapped: false });
  });

  it('types a union of objects as an object at its root, unwrapped, following local references', () => {
    const union = { $schema: DRAFT, oneOf: [{ type: 'object', properties: { a: { type: 'string' } } }, { $ref: '#/$defs/b' }], $defs: { b: { type: 'object' } } };
    expect(toolInputOf(union)).toEqual({ inputSchema: { ...union, type: 'object' }, wrapped: false });
    const intersection = { allOf: [{ type: 'object' }, { required: ['a'] }] };
    expect(toolInputOf(intersection)).toEqual({ inputSchema: { ...intersection, type: 'object' }, wrapped: false });
  });

  it('wraps anything else as the one required property `input`, keeping definitions at the root', () => {
    expect(toolInputOf({ $schema: DRAFT, type: 'string', minLength: 1 })).toEqual({
      inputSchema: { $schema: DRAFT, type: 'object', properties: { input: { type: 'string', minLength: 1 } }, required: ['input'], additionalProperties: false },
      wrapped: true,
    });
    const tree = { $schema: DRAFT, type: 'array', items: { $ref: '#/$defs/node' }, $defs: { node: { type: 'object' } } };
    expect(toolInputOf(tree).inputSchema).toEqual({
      $schema: DRAFT,
      type: 'object',
      properties: { input: { type: 'array', items: { $ref: '#/$defs/node' } } },
      required: ['input'],
      additionalProperties: false,
      $defs: { node: { type: 'object' } },
    });
    for (const schema of [{ anyOf: [{ type: 'object' }, { type: 'null' }] }, { type: ['object', 'null'] }, {}, { $ref: '#/$defs/missing' }]) {
      expect(toolInputOf(schema).wrapped).toBe(true);
    }
  });

  it("reads a wrapped tool's arguments back as the action's input", () => {
    expect(actionInputOf({ input: 'hello' }, true)).toBe('hello');
    expect(actionInputOf(undefined, true)).toBeUndefined();
    expect(actionInputOf({ n: 1 }, false)).toEqual({ n: 1 });
  });
});
