import { describe, expect, it } from 'vitest';
import { buildCrds, type JsonSchema } from '../../../../operator/src/api/v1alpha1/crd.ts';
import { crdAjv, isObject, openApiSchema, schemaNodes, type Json } from './schema-tools.ts';

/*
 * The API server accepts a CRD only with a structural schema, and then prunes, defaults and merges by it. These are the
 * rules of https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema
 * plus the conventions of spec/operator.md §2.5 (list semantics for server-side apply, bounded sizes for CEL cost).
 */

const crds = buildCrds();

/** OpenAPI v3 keywords a CRD schema may use; anything else (const, $ref, patternProperties…) is rejected or pruned. */
const ALLOWED_KEYWORDS = new Set([
  'type',
  'format',
  'title',
  'description',
  'default',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'multipleOf',
  'enum',
  'maxProperties',
  'minProperties',
  'required',
  'items',
  'allOf',
  'oneOf',
  'anyOf',
  'not',
  'properties',
  'additionalProperties',
  'nullable',
  'example',
  'externalDocs',
  'x-kubernetes-validations',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-map-type',
  'x-kubernetes-int-or-string',
  'x-kubernetes-embedded-resource',
]);

/** Keywords allowed inside allOf/anyOf/oneOf/not: value validations only, no structure. */
const VALUE_VALIDATION_KEYWORDS = new Set([
  'format',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'multipleOf',
  'enum',
  'maxProperties',
  'minProperties',
  'required',
  'properties',
  'items',
  'allOf',
  'anyOf',
  'oneOf',
  'not',
]);

/**
 * Where the schemas deliberately keep unknown fields: embedded Kubernetes types (resources, affinity, containers…) and
 * the free-form runtime config. A new preserve-unknown node must be added here on purpose, because inside one the API
 * server validates nothing and prunes nothing.
 */
const PRESERVE_UNKNOWN: Readonly<Record<string, readonly string[]>> = {
  Cluster: [
    '.spec.imagePullSecrets[*]',
    '.spec.config',
    '.spec.networkPolicy.allowFrom.ingress[*]',
    '.spec.networkPolicy.allowFrom.admin[*]',
    '.spec.networkPolicy.allowFrom.introspection[*]',
    '.spec.networkPolicy.allowFrom.observability[*]',
    '.spec.pod.resources',
    '.spec.pod.env[*]',
    '.spec.pod.envFrom[*]',
    '.spec.pod.tolerations[*]',
    '.spec.pod.affinity',
    '.spec.pod.topologySpreadConstraints[*]',
    '.spec.pod.podSecurityContext',
    '.spec.pod.securityContext',
    '.spec.pod.sidecars[*]',
    '.spec.pod.extraVolumes[*]',
    '.spec.pod.extraVolumeMounts[*]',
  ],
  Deployment: [],
  Subscription: [],
};

function nodesOf(crdIndex: number) {
  return schemaNodes(openApiSchema(crds[crdIndex]!));
}

describe.each(crds.map((crd, i) => [crd.spec.names.kind, i] as const))('%s CRD schema', (kind, index) => {
  const nodes = nodesOf(index);

  it('uses only keywords Kubernetes knows, and never uniqueItems: true', () => {
    const problems = nodes.flatMap(({ path, schema }) => [
      ...Object.keys(schema)
        .filter((k) => !ALLOWED_KEYWORDS.has(k))
        .map((k) => `${path}: ${k}`),
      ...(schema['uniqueItems'] === true ? [`${path}: uniqueItems`] : []),
    ]);
    expect(problems).toEqual([]);
  });

  it('is structural: every node outside allOf/anyOf/oneOf/not has a type, every array its items', () => {
    const problems = nodes
      .filter(({ path }) => !path.includes('<'))
      .flatMap(({ path, schema }) => [
        ...(typeof schema['type'] === 'string' ? [] : [`${path}: no type`]),
        ...(schema['type'] === 'array' && !isObject(schema['items']) ? [`${path}: array without items`] : []),
        ...(schema['type'] === 'object' && isObject(schema['properties']) && schema['additionalProperties'] !== undefined
          ? [`${path}: properties together with additionalProperties`]
          : []),
      ]);
    expect(problems).toEqual([]);
  });

  it('keeps allOf/anyOf/oneOf/not to value validations (no types, defaults or descriptions inside)', () => {
    const problems = nodes
      .filter(({ path }) => path.includes('<'))
      .flatMap(({ path, schema }) =>
        Object.keys(schema)
          .filter((k) => !VALUE_VALIDATION_KEYWORDS.has(k))
          .map((k) => `${path}: ${k}`),
      );
    expect(problems).toEqual([]);
  });

  it('preserves unknown fields only where intended', () => {
    const preserved = nodes
      .filter(({ schema }) => schema['x-kubernetes-preserve-unknown-fields'] === true)
      .map(({ path }) => path);
    expect(preserved.sort()).toEqual([...(PRESERVE_UNKNOWN[kind] ?? [])].sort());
    for (const { path, schema } of nodes) {
      if (schema['x-kubernetes-preserve-unknown-fields'] === true) expect(schema['type'], path).toBe('object');
    }
  });

  it('declares list semantics on every array (server-side apply merges by them)', () => {
    const problems = nodes.flatMap(({ path, schema }) => {
      if (schema['type'] !== 'array') return [];
      const listType = schema['x-kubernetes-list-type'];
      const items = schema['items'] as JsonSchema;
      switch (listType) {
        case 'atomic':
          return [];
        case 'set':
          return items['type'] === 'object' || items['type'] === 'array' ? [`${path}: set of non-scalars`] : [];
        case 'map': {
          const keys = schema['x-kubernetes-list-map-keys'];
          if (!Array.isArray(keys) || keys.length === 0) return [`${path}: map list without list-map-keys`];
          const required = (items['required'] ?? []) as string[];
          const properties = (items['properties'] ?? {}) as Record<string, JsonSchema>;
          return (keys as string[]).flatMap((key) => {
            const field = properties[key];
            if (field === undefined) return [`${path}: map key ${key} is not a property of the items`];
            if (!required.includes(key) && field['default'] === undefined) {
              return [`${path}: map key ${key} is neither required nor defaulted`];
            }
            return ['string', 'integer', 'boolean'].includes(field['type'] as string)
              ? []
              : [`${path}: map key ${key} is not a scalar`];
          });
        }
        default:
          return [`${path}: no x-kubernetes-list-type`];
      }
    });
    expect(problems).toEqual([]);
  });

  it('bounds every list, map and string in spec (the CEL cost budget and the object size depend on it)', () => {
    const problems = nodes
      .filter(({ path }) => path.startsWith('.spec'))
      .flatMap(({ path, schema }) => {
        if (schema['type'] === 'array' && schema['maxItems'] === undefined) return [`${path}: no maxItems`];
        if (schema['type'] === 'string' && schema['maxLength'] === undefined && schema['enum'] === undefined) {
          return [`${path}: no maxLength`];
        }
        if (isObject(schema['additionalProperties']) && schema['maxProperties'] === undefined) {
          return [`${path}: map without maxProperties`];
        }
        return [];
      });
    expect(problems).toEqual([]);
  });

  it('has defaults that validate against their own node (the API server rejects the CRD otherwise)', () => {
    const ajv = crdAjv();
    const problems = nodes.flatMap(({ path, schema }) => {
      if (schema['default'] === undefined) return [];
      const { default: value, ...rest } = schema;
      const validate = ajv.compile(rest);
      return validate(structuredClone(value)) ? [] : [`${path}: default ${JSON.stringify(value)} is invalid`];
    });
    expect(problems).toEqual([]);
  });

  it('describes every scalar or list field directly under spec (kubectl explain reads the descriptions)', () => {
    const missing = nodes
      .filter(({ path }) => /^\.spec\.[A-Za-z]+$/.test(path))
      .filter(({ schema }) => schema['type'] !== 'object' && typeof schema['description'] !== 'string')
      .map(({ path }) => path);
    expect(missing).toEqual([]);
  });

  it('has printer columns whose JSON paths exist in the schema', () => {
    const crd = crds[index]!;
    const root = openApiSchema(crd);
    for (const column of crd.spec.versions[0]!.additionalPrinterColumns) {
      if (column.jsonPath.startsWith('.metadata.')) continue;
      const fields = column.jsonPath
        .replace(/\[\?\(@\.type=="[A-Za-z]+"\)\]/, '[*]')
        .split(/\.|\[\*\]/)
        .filter((f) => f !== '');
      let node: Json | undefined = root as Json;
      let viaItems = false;
      for (const field of fields) {
        if (!isObject(node)) break;
        if (viaItems) node = node['items'];
        node = isObject(node) && isObject(node['properties']) ? node['properties'][field] : undefined;
        viaItems = isObject(node) && node['type'] === 'array';
      }
      expect(node, `${column.name}: ${column.jsonPath}`).toBeDefined();
    }
  });
});
