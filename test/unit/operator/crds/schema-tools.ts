import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isCelError, parse, run, type CelInput } from '@bufbuild/cel';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { parseAllDocuments } from 'yaml';
import type { CustomResourceDefinition, JsonSchema } from '../../../../operator/src/api/v1alpha1/crd.ts';

/*
 * What the API server does with a custom resource on create and update, as far as a test can without one: defaulting
 * and OpenAPI validation (ajv), strict field validation (unknown fields, as kubectl's default --validate=strict),
 * list-map key uniqueness, and every `x-kubernetes-validations` CEL rule evaluated with @bufbuild/cel, walking schema
 * and object together, with `oldSelf` bound on updates. Messages read like the API server's: `<path>: <message>`.
 */

export const REPO_ROOT = join(import.meta.dirname, '..', '..', '..', '..');

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function readRepoFile(path: string): string {
  return readFileSync(join(REPO_ROOT, path), 'utf8');
}

/** Every document of a YAML file (strict: duplicate keys are errors), skipping empty ones. */
export function readYamlDocs(text: string, source = 'yaml'): JsonObject[] {
  return parseAllDocuments(text, { uniqueKeys: true })
    .map((doc, i) => {
      if (doc.errors.length > 0) throw new Error(`${source}, document ${i}: ${doc.errors[0]!.message}`);
      return doc.toJS() as Json;
    })
    .filter((d): d is JsonObject => isObject(d));
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function openApiSchema(crd: CustomResourceDefinition): JsonSchema {
  const version = crd.spec.versions[0];
  if (version === undefined) throw new Error(`${crd.metadata.name} has no version`);
  return version.schema.openAPIV3Schema;
}

// ---------------------------------------------------------------------------------------------------------------
// Schema walking

export interface SchemaNode {
  /** `.spec.database.secretRef`, with `[*]` for list items and `{*}` for map values. */
  readonly path: string;
  readonly schema: JsonSchema;
}

/** Every node of a structural schema, depth first, root included. */
export function schemaNodes(schema: JsonSchema, path = ''): SchemaNode[] {
  const nodes: SchemaNode[] = [{ path: path === '' ? '.' : path, schema }];
  const properties = schema['properties'];
  if (isObject(properties)) {
    for (const [name, sub] of Object.entries(properties)) nodes.push(...schemaNodes(sub as JsonSchema, `${path}.${name}`));
  }
  const items = schema['items'];
  if (isObject(items)) nodes.push(...schemaNodes(items, `${path}[*]`));
  const additional = schema['additionalProperties'];
  if (isObject(additional)) nodes.push(...schemaNodes(additional, `${path}{*}`));
  for (const keyword of ['allOf', 'anyOf', 'oneOf']) {
    const list = schema[keyword];
    if (Array.isArray(list)) {
      list.forEach((sub, i) => nodes.push(...schemaNodes(sub as JsonSchema, `${path}<${keyword}[${i}]>`)));
    }
  }
  if (isObject(schema['not'])) nodes.push(...schemaNodes(schema['not'], `${path}<not>`));
  return nodes;
}

export interface CelRule {
  readonly rule: string;
  readonly message?: string;
  readonly messageExpression?: string;
  readonly reason?: string;
  readonly fieldPath?: string;
}

export function celRules(schema: JsonSchema): CelRule[] {
  const rules: unknown = schema['x-kubernetes-validations'];
  return Array.isArray(rules) ? rules.map((r: CelRule) => r) : [];
}

/** Every CEL rule of a schema with the path of the node it sits on. */
export function allCelRules(schema: JsonSchema): { path: string; schema: JsonSchema; rule: CelRule }[] {
  return schemaNodes(schema).flatMap((node) => celRules(node.schema).map((rule) => ({ ...node, rule })));
}

// ---------------------------------------------------------------------------------------------------------------
// CEL

/** Functions and operators of the Kubernetes CEL environment that rules here may use (and @bufbuild/cel implements). */
const KNOWN_FUNCTIONS = new Set([
  '_&&_',
  '_||_',
  '_==_',
  '_!=_',
  '_<_',
  '_<=_',
  '_>_',
  '_>=_',
  '_+_',
  '_-_',
  '_*_',
  '_/_',
  '_%_',
  '!_',
  '-_',
  '_?_:_',
  '_[_]',
  '@in',
  '@not_strictly_false',
  'size',
  'matches',
  'startsWith',
  'endsWith',
  'contains',
  'int',
  'uint',
  'double',
  'string',
  'bool',
  'type',
  'dyn',
]);

interface ExprNode {
  exprKind: { case: string | undefined; value?: unknown };
}

/** A rule that reads `oldSelf` is a transition rule: the API server evaluates it on updates only. */
export function isTransitionRule(rule: string): boolean {
  return /\boldSelf\b/.test(rule);
}

/**
 * "Compiles" a rule the way the API server's type check would reject it: syntax (parse), unknown functions, free
 * variables other than self/oldSelf, and field selections that the schema at the rule's node does not declare.
 * Returns the problems found (empty when the rule compiles).
 */
export function compileProblems(rule: string, schema: JsonSchema): string[] {
  let root: ExprNode;
  try {
    root = parse(rule).expr;
  } catch (err) {
    return [`syntax: ${(err as Error).message}`];
  }
  const problems: string[] = [];
  const bound = new Set(['self', 'oldSelf']);
  const visit = (node: ExprNode): void => {
    const { case: kind, value } = node.exprKind;
    switch (kind) {
      case 'identExpr': {
        const name = (value as { name: string }).name;
        if (!bound.has(name)) problems.push(`undeclared reference to '${name}'`);
        return;
      }
      case 'selectExpr': {
        const path = selectPath(node);
        if (path !== undefined) {
          const missing = missingField(schema, path.fields);
          if (missing !== undefined) problems.push(`undefined field '${missing}' (in ${path.root}.${path.fields.join('.')})`);
          return;
        }
        visit((value as { operand: ExprNode }).operand);
        return;
      }
      case 'callExpr': {
        const call = value as { function: string; target?: ExprNode; args: ExprNode[] };
        if (!KNOWN_FUNCTIONS.has(call.function)) problems.push(`found no matching overload for '${call.function}'`);
        if (call.target !== undefined) visit(call.target);
        call.args.forEach(visit);
        return;
      }
      case 'comprehensionExpr': {
        const c = value as {
          iterVar: string;
          accuVar: string;
          iterRange: ExprNode;
          accuInit: ExprNode;
          loopCondition: ExprNode;
          loopStep: ExprNode;
          result: ExprNode;
        };
        visit(c.iterRange);
        bound.add(c.iterVar);
        bound.add(c.accuVar);
        [c.accuInit, c.loopCondition, c.loopStep, c.result].forEach(visit);
        return;
      }
      case 'listExpr':
        (value as { elements: ExprNode[] }).elements.forEach(visit);
        return;
      case 'structExpr':
        for (const entry of (value as { entries: { value: ExprNode; mapKey?: ExprNode }[] }).entries) {
          if (entry.mapKey !== undefined) visit(entry.mapKey);
          visit(entry.value);
        }
        return;
      case undefined:
      default:
        return; // constants
    }
  };
  visit(root);
  return problems;
}

/** `self.a.b` → {root: 'self', fields: ['a', 'b']}; undefined when the chain does not start at self/oldSelf. */
function selectPath(node: ExprNode): { root: string; fields: string[] } | undefined {
  const { case: kind, value } = node.exprKind;
  if (kind === 'identExpr') {
    const name = (value as { name: string }).name;
    return name === 'self' || name === 'oldSelf' ? { root: name, fields: [] } : undefined;
  }
  if (kind === 'selectExpr') {
    const select = value as { operand: ExprNode; field: string };
    const inner = selectPath(select.operand);
    return inner === undefined ? undefined : { root: inner.root, fields: [...inner.fields, select.field] };
  }
  return undefined;
}

function missingField(schema: JsonSchema, fields: readonly string[]): string | undefined {
  let node: JsonSchema | undefined = schema;
  for (const field of fields) {
    if (node === undefined) return field;
    const properties: unknown = node['properties'];
    if (isObject(properties) && isObject(properties[field])) {
      node = properties[field];
    } else if (isObject(node['additionalProperties'])) {
      node = node['additionalProperties'];
    } else if (node['x-kubernetes-preserve-unknown-fields'] === true) {
      return undefined;
    } else {
      return field;
    }
  }
  return undefined;
}

/** A JSON value as the API server hands it to CEL: objects as maps, integers as int (bigint), numbers as double. */
export function toCel(schema: JsonSchema | undefined, value: Json): CelInput {
  if (value === null) return null;
  if (Array.isArray(value)) {
    const items = schema?.['items'] as JsonSchema | undefined;
    return value.map((v) => toCel(items, v));
  }
  if (typeof value === 'object') {
    const properties = (schema?.['properties'] ?? {}) as Record<string, JsonSchema>;
    const additional = isObject(schema?.['additionalProperties'])
      ? (schema['additionalProperties'] as JsonSchema)
      : undefined;
    return new Map(Object.entries(value).map(([k, v]) => [k, toCel(properties[k] ?? additional, v)]));
  }
  if (typeof value === 'number') {
    const type = schema?.['type'];
    if (type === 'integer' || (type === undefined && Number.isInteger(value))) return BigInt(value);
    return value;
  }
  return value;
}

export interface Violation {
  readonly path: string;
  readonly message: string;
}

/**
 * Evaluates every CEL rule the way the API server does: on each node present in the object; transition rules only
 * where the old object has the node too (list-map items correlated by key, atomic lists not at all).
 */
export function celViolations(schema: JsonSchema, value: Json | undefined, old?: Json, path = ''): Violation[] {
  if (value === undefined) return [];
  const out: Violation[] = [];
  for (const rule of celRules(schema)) {
    const transition = isTransitionRule(rule.rule);
    if (transition && old === undefined) continue;
    const bindings: Record<string, CelInput> = { self: toCel(schema, value) };
    if (transition && old !== undefined) bindings['oldSelf'] = toCel(schema, old);
    const result = run(rule.rule, bindings);
    if (isCelError(result)) {
      out.push({ path: display(path), message: `rule evaluation error: ${result.message} (${rule.rule})` });
    } else if (result !== true) {
      out.push({ path: display(path), message: rule.message ?? `failed rule: ${rule.rule}` });
    }
  }
  const properties = schema['properties'];
  if (isObject(value) && isObject(properties)) {
    const oldObject = isObject(old) ? old : undefined;
    for (const [name, sub] of Object.entries(properties)) {
      out.push(...celViolations(sub as JsonSchema, value[name], oldObject?.[name], `${path}.${name}`));
    }
  }
  const additional = schema['additionalProperties'];
  if (isObject(value) && isObject(additional)) {
    for (const [key, v] of Object.entries(value)) {
      const oldValue = isObject(old) ? old[key] : undefined;
      out.push(...celViolations(additional, v, oldValue, `${path}[${key}]`));
    }
  }
  const items = schema['items'];
  if (Array.isArray(value) && isObject(items)) {
    const listType = schema['x-kubernetes-list-type'];
    const keys = (schema['x-kubernetes-list-map-keys'] ?? []) as string[];
    value.forEach((item, i) => {
      let oldItem: Json | undefined;
      if (Array.isArray(old) && listType === 'map' && isObject(item)) {
        oldItem = old.find((o) => isObject(o) && keys.every((k) => o[k] === item[k]));
      } else if (Array.isArray(old) && listType === 'set') {
        oldItem = old.find((o) => o === item);
      }
      out.push(...celViolations(items, item, oldItem, `${path}[${i}]`));
    });
  }
  return out;
}

function display(path: string): string {
  return path === '' ? '<root>' : path.slice(1);
}

// ---------------------------------------------------------------------------------------------------------------
// Whole-object validation

const K8S_KEYWORDS = [
  'x-kubernetes-validations',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-embedded-resource',
  'x-kubernetes-map-type',
];

/** ajv for CRD schemas: OpenAPI formats, defaults applied, Kubernetes extensions known but inert. */
export function crdAjv(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true, useDefaults: true, validateFormats: true });
  // ajv-formats is CommonJS with `exports.default`; under NodeNext its default import is the module namespace.
  const addFormats = (addFormatsModule as unknown as { default: (a: Ajv) => Ajv }).default;
  addFormats(ajv);
  for (const keyword of K8S_KEYWORDS) ajv.addKeyword({ keyword });
  return ajv;
}

export class CrdValidator {
  private readonly validate: ValidateFunction;

  constructor(
    readonly crd: CustomResourceDefinition,
    ajv: Ajv = crdAjv(),
  ) {
    this.validate = ajv.compile(openApiSchema(crd));
  }

  /** The object after the API server's defaulting. */
  defaulted(object: JsonObject): JsonObject {
    const copy = structuredClone(object);
    this.validate(copy);
    return copy;
  }

  /** The errors the API server would report for a create (old undefined) or an update; empty when it is accepted. */
  errors(object: JsonObject, old?: JsonObject): string[] {
    const schema = openApiSchema(this.crd);
    const defaulted = structuredClone(object);
    const errors: string[] = [];
    if (!this.validate(defaulted)) errors.push(...(this.validate.errors ?? []).map(formatAjvError));
    errors.push(...unknownFields(schema, object, ''));
    errors.push(...listKeyDuplicates(schema, object, ''));
    const oldDefaulted = old === undefined ? undefined : structuredClone(old);
    if (oldDefaulted !== undefined) this.validate(oldDefaulted);
    errors.push(...celViolations(schema, defaulted, oldDefaulted).map((v) => `${v.path}: ${v.message}`));
    return errors;
  }
}

function formatAjvError(error: ErrorObject): string {
  const path = error.instancePath.replace(/^\//, '').replace(/\//g, '.') || '<root>';
  return `${path}: ${error.message ?? error.keyword}`;
}

/** Fields a structural schema does not declare: pruned silently by the API server, rejected by kubectl's strict mode. */
function unknownFields(schema: JsonSchema, value: Json | undefined, path: string): string[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) {
    const items = schema['items'];
    return isObject(items) ? value.flatMap((v, i) => unknownFields(items as JsonSchema, v, `${path}[${i}]`)) : [];
  }
  if (!isObject(value)) return [];
  const properties = isObject(schema['properties']) ? schema['properties'] : {};
  const additional = isObject(schema['additionalProperties']) ? (schema['additionalProperties'] as JsonSchema) : undefined;
  const preserve = schema['x-kubernetes-preserve-unknown-fields'] === true;
  // metadata is the API server's own business (ObjectMeta), never pruned by the CRD schema.
  if (path === '.metadata') return [];
  return Object.entries(value).flatMap(([key, v]) => {
    const sub = properties[key] as JsonSchema | undefined;
    if (sub !== undefined) return unknownFields(sub, v, `${path}.${key}`);
    if (additional !== undefined) return unknownFields(additional, v, `${path}.${key}`);
    return preserve ? [] : [`${`${path}.${key}`.slice(1)}: unknown field "${key}"`];
  });
}

function listKeyDuplicates(schema: JsonSchema, value: Json | undefined, path: string): string[] {
  if (value === undefined || value === null) return [];
  const out: string[] = [];
  if (Array.isArray(value)) {
    const listType = schema['x-kubernetes-list-type'];
    const keys = (schema['x-kubernetes-list-map-keys'] ?? []) as string[];
    const seen = new Set<string>();
    value.forEach((item, i) => {
      const identity =
        listType === 'map' && isObject(item)
          ? JSON.stringify(keys.map((k) => item[k]))
          : listType === 'set'
            ? JSON.stringify(item)
            : undefined;
      if (identity === undefined) return;
      if (seen.has(identity)) out.push(`${path.slice(1)}[${i}]: Duplicate value: ${identity}`);
      seen.add(identity);
    });
    const items = schema['items'];
    if (isObject(items)) value.forEach((v, i) => out.push(...listKeyDuplicates(items, v, `${path}[${i}]`)));
    return out;
  }
  if (!isObject(value)) return out;
  const properties = isObject(schema['properties']) ? schema['properties'] : {};
  for (const [key, v] of Object.entries(value)) {
    const sub = properties[key] as JsonSchema | undefined;
    if (sub !== undefined) out.push(...listKeyDuplicates(sub, v, `${path}.${key}`));
  }
  return out;
}
