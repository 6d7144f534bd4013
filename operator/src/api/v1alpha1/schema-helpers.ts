import { Type, type TUnsafe, type SchemaOptions } from '@sinclair/typebox';

/*
 * Schema building blocks that stay inside Kubernetes' structural-schema rules: no `const`, no `anyOf` of literals,
 * no `patternProperties`; maps are `additionalProperties`, enums are plain string enums, and embedded Kubernetes types
 * (PodSpec parts) are preserve-unknown objects so each CRD stays far below 256 KB.
 */

/** A CEL rule as Kubernetes stores it under `x-kubernetes-validations`. */
export interface CelRule {
  readonly rule: string;
  readonly message: string;
  readonly reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
  readonly fieldPath?: string;
}

export function cel(...rules: CelRule[]): { 'x-kubernetes-validations': CelRule[] } {
  return { 'x-kubernetes-validations': rules };
}

/** Immutability: a field that may be set once and never changed (`self == oldSelf`). */
export const immutable = (what: string): CelRule => ({ rule: 'self == oldSelf', message: `${what} is immutable` });

/** Exactly one of the named optional properties of an object is set. */
export function exactlyOneOf(fields: readonly string[], what: string): CelRule {
  const terms = fields.map((f) => `(has(self.${f}) ? 1 : 0)`).join(' + ');
  return { rule: `${terms} == 1`, message: `exactly one of ${fields.join(', ')} must be set (${what})` };
}

/** At most one of the named optional properties of an object is set. */
export function atMostOneOf(fields: readonly string[], what: string): CelRule {
  const terms = fields.map((f) => `(has(self.${f}) ? 1 : 0)`).join(' + ');
  return { rule: `${terms} <= 1`, message: `at most one of ${fields.join(', ')} may be set (${what})` };
}

export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: SchemaOptions = {},
): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

export function StringMap(options: SchemaOptions = {}): TUnsafe<Record<string, string>> {
  return Type.Unsafe<Record<string, string>>({
    type: 'object',
    additionalProperties: { type: 'string', maxLength: 4096 },
    maxProperties: 64,
    ...options,
  });
}

/** An embedded object Ratchet passes through to Kubernetes unchanged (resources, affinity, a container, …). */
export function Opaque<T = Record<string, unknown>>(description: string): TUnsafe<T> {
  return Type.Unsafe<T>({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true, description });
}

/** A list of opaque objects merged by `name` under server-side apply. */
export function OpaqueListByName<T = Record<string, unknown>>(description: string, maxItems = 64): TUnsafe<T[]> {
  return Type.Unsafe<T[]>({
    type: 'array',
    description,
    maxItems,
    'x-kubernetes-list-type': 'map',
    'x-kubernetes-list-map-keys': ['name'],
    items: {
      type: 'object',
      required: ['name'],
      properties: { name: { type: 'string', maxLength: 253 } },
      'x-kubernetes-preserve-unknown-fields': true,
    },
  });
}

/** A list of opaque objects replaced as a whole. */
export function OpaqueList<T = Record<string, unknown>>(description: string, maxItems = 64): TUnsafe<T[]> {
  return Type.Unsafe<T[]>({
    type: 'array',
    description,
    maxItems,
    'x-kubernetes-list-type': 'atomic',
    items: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
  });
}

/** `metav1.Duration`-style text: `30s`, `5m`, `1h30m`. */
export const DURATION_PATTERN = '^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$';

export function Duration(description: string, options: SchemaOptions = {}): TUnsafe<string> {
  return Type.Unsafe<string>({ type: 'string', pattern: DURATION_PATTERN, maxLength: 32, description, ...options });
}

/** A DNS-1123 label or subdomain name of another object in the same namespace. */
export function Name(description: string, options: SchemaOptions = {}): TUnsafe<string> {
  return Type.Unsafe<string>({
    type: 'string',
    minLength: 1,
    maxLength: 253,
    pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$',
    description,
    ...options,
  });
}

export function LocalObjectReference(description: string) {
  return Type.Object({ name: Name('Name of the object in the same namespace.') }, { description });
}

export function SecretKeySelector(description: string, defaultKey?: string) {
  return Type.Object(
    {
      name: Name('Name of the Secret in the same namespace.'),
      key: Type.Optional(
        Type.String({
          minLength: 1,
          maxLength: 253,
          description:
            defaultKey === undefined ? 'Key within the Secret.' : `Key within the Secret (default ${defaultKey}).`,
          ...(defaultKey === undefined ? {} : { default: defaultKey }),
        }),
      ),
    },
    { description },
  );
}

/** `metav1.Condition`, as a list map keyed by `type`. */
export const Condition = Type.Object({
  type: Type.String({ maxLength: 316, description: 'Condition type, e.g. Ready.' }),
  status: StringEnum(['True', 'False', 'Unknown'] as const),
  observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
  lastTransitionTime: Type.String({ format: 'date-time', description: 'When status last changed.' }),
  reason: Type.String({ maxLength: 1024, description: 'CamelCase machine-readable reason.' }),
  message: Type.String({ maxLength: 32768, description: 'Human-readable detail.' }),
});

export const Conditions = Type.Array(Condition, {
  maxItems: 16,
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
  description: 'Current state, in metav1.Condition form (Ready, Reconciling, Stalled and kind-specific ones).',
});
