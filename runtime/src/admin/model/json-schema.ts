import {
  Kind,
  Type,
  type SchemaOptions,
  type Static,
  type TArray,
  type TSchema,
  type TUnsafe,
} from '@sinclair/typebox';

/*
 * Building blocks of the admin API model. They write the JSON Schema of restate-server's document (which Ratchet's
 * `GET /openapi` serves): a nullable field is `type: [T, "null"]`, a map `additionalProperties`, an enum a string
 * `enum`, a named component a `$ref`. TypeBox's own unions and records would infer the same TypeScript types but
 * write `anyOf` and `patternProperties`. What the checks reading requests need beyond the JSON Schema (a component's
 * name, what a `$ref` points at, what kind of string a field holds) is kept under symbols, which no JSON output shows.
 */

const COMPONENT_NAME = Symbol('admin.model.component');
const REF_TARGET = Symbol('admin.model.ref');
const MEANING = Symbol('admin.model.meaning');

/**
 * What a string (or map) field holds beyond its JSON type, for the checks that read request bodies: a duration in
 * jiff's friendly format or ISO-8601, a Kafka cluster name (a hostname), HTTP header names and values.
 */
export type Meaning = 'duration' | 'kafka-cluster-name' | 'http-headers';

interface Annotated {
  [COMPONENT_NAME]?: string;
  [REF_TARGET]?: TSchema;
  [MEANING]?: Meaning;
}

/** Names `schema` as `#/components/schemas/<name>` of the OpenAPI document; `Ref` points there. */
export function Component<T extends TSchema>(name: string, schema: T): T {
  (schema as T & Annotated)[COMPONENT_NAME] = name;
  return schema;
}

export function componentName(schema: TSchema): string {
  const name = (schema as TSchema & Annotated)[COMPONENT_NAME];
  if (name === undefined) throw new Error('the schema is not a component of the admin API model');
  return name;
}

/** The component a `Ref` points at; undefined for any other schema. */
export function refTarget(schema: TSchema): TSchema | undefined {
  return (schema as TSchema & Annotated)[REF_TARGET];
}

/** What the field holds beyond its JSON type (see `Meaning`). */
export function meaningOf(schema: TSchema): Meaning | undefined {
  return (schema as TSchema & Annotated)[MEANING];
}

/** A plain copy without TypeBox's (or this model's) symbols: what the OpenAPI document shows. */
export function toJsonSchema(schema: TSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
}

export function Ref<T extends TSchema>(component: T, options: SchemaOptions = {}): TUnsafe<Static<T>> {
  const ref = Type.Unsafe<Static<T>>({ $ref: `#/components/schemas/${componentName(component)}`, ...options });
  (ref as TUnsafe<Static<T>> & Annotated)[REF_TARGET] = component;
  return ref;
}

/** `type: [T, "null"]` for a schema with a single `type`. */
export function Nullable<T extends TSchema>(schema: T, options: SchemaOptions = {}): TUnsafe<Static<T> | null> {
  if (typeof schema.type !== 'string') throw new Error('Nullable takes a schema with a single type');
  return Type.Unsafe<Static<T> | null>({ ...schema, [Kind]: 'Unsafe', type: [schema.type, 'null'], ...options });
}

/** `oneOf` the given object schemas: restate's untagged enums (an HTTP and a Lambda variant). */
export function OneOf<const T extends readonly TSchema[]>(variants: T): TUnsafe<Static<T[number]>> {
  return Type.Unsafe<Static<T[number]>>({ oneOf: variants.map((v) => toJsonSchema(v)) });
}

/** `oneOf: [null, schema]`: restate's form for an optional reference (`ty`, `on_max_attempts`). */
export function OrNull<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  return Type.Unsafe<Static<T> | null>({ oneOf: [{ type: 'null' }, schema] });
}

export function StringEnum<const V extends readonly string[]>(
  values: V,
  options: SchemaOptions = {},
): TUnsafe<V[number]> {
  return Type.Unsafe<V[number]>({ type: 'string', enum: [...values], ...options });
}

/** A JSON object used as a map from names to `values`. */
export function MapOf<V extends TSchema>(values: V, options: SchemaOptions = {}): TUnsafe<Record<string, Static<V>>> {
  return Type.Unsafe<Record<string, Static<V>>>({ type: 'object', additionalProperties: values, ...options });
}

export function StringMap(options: SchemaOptions = {}): TUnsafe<Record<string, string>> {
  return MapOf(Type.String(), options);
}

/** Any JSON object (a row of a query result). */
export function AnyObject(): TUnsafe<Record<string, unknown>> {
  return Type.Unsafe<Record<string, unknown>>({ type: 'object' });
}

/** An array of a named component. */
export function ArrayOf<T extends TSchema>(component: T, options: SchemaOptions = {}): TArray<TUnsafe<Static<T>>> {
  return Type.Array(Ref(component), options);
}

/** `schema`, marked as holding `meaning` (see `Meaning`). */
export function Meaningful<T extends TSchema>(meaning: Meaning, schema: T): T {
  (schema as T & Annotated)[MEANING] = meaning;
  return schema;
}
