import type { TSchema } from '@sinclair/typebox';
import { GROUP, KINDS, VERSION, type KindDefinition, type KindName, type PrinterColumn } from './index.ts';

/*
 * CustomResourceDefinitions built from the TypeBox schemas, which are the single source of truth: `npm run gen:crds`
 * writes them to crds/ and to the CRD Helm chart, and a test fails when the checked-in files drift from this output.
 * Pure and deterministic: the same schemas give byte-identical YAML.
 */

export type JsonSchema = { [keyword: string]: unknown };

export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels: Record<string, string>; annotations: Record<string, string> };
  spec: {
    group: string;
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames: string[];
      categories: string[];
    };
    scope: 'Namespaced';
    versions: CrdVersion[];
  };
}

export interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  subresources: { status: Record<string, never> };
  additionalPrinterColumns: PrinterColumn[];
  schema: { openAPIV3Schema: JsonSchema };
}

/** Labels on every CRD; the chart adds its own on top. */
export const CRD_LABELS: Readonly<Record<string, string>> = {
  'app.kubernetes.io/name': 'ratchet-operator-crds',
  'app.kubernetes.io/part-of': 'ratchet',
};

/**
 * Argo CD applies large CRDs client-side into a 256 KB annotation unless told otherwise; ours are small, but server-side
 * apply is what the operator's own field ownership assumes anyway.
 */
export const CRD_ANNOTATIONS: Readonly<Record<string, string>> = {
  'argocd.argoproj.io/sync-options': 'ServerSideApply=true',
};

export function crdName(def: Pick<KindDefinition, 'plural'>): string {
  return `${def.plural}.${GROUP}`;
}

/** Every CRD, in a fixed order (the order of KINDS). */
export function buildCrds(): CustomResourceDefinition[] {
  return (Object.keys(KINDS) as KindName[]).map((name) => buildCrd(KINDS[name]));
}

export function buildCrd(def: KindDefinition): CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: crdName(def), labels: { ...CRD_LABELS }, annotations: { ...CRD_ANNOTATIONS } },
    spec: {
      group: GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        shortNames: [...def.shortNames],
        categories: [...def.categories],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: def.printerColumns.map((c) => ({ ...c })),
          schema: { openAPIV3Schema: rootSchema(def) },
        },
      ],
    },
  };
}

function rootSchema(def: KindDefinition): JsonSchema {
  return {
    type: 'object',
    description: def.description,
    required: ['spec'],
    properties: {
      apiVersion: {
        type: 'string',
        description: 'APIVersion defines the versioned schema of this representation of an object.',
      },
      kind: {
        type: 'string',
        description: 'Kind is a string value representing the REST resource this object represents.',
      },
      // Kubernetes validates metadata itself; a structural schema may say no more than its type.
      metadata: { type: 'object' },
      spec: toJsonSchema(def.spec),
      status: toJsonSchema(def.status),
    },
  };
}

/** TypeBox keeps its bookkeeping under symbol keys; a few string keys are JSON Schema that Kubernetes rejects. */
const DROPPED_KEYWORDS = new Set(['$id', '$schema']);

/** Keywords first in every node, so the YAML reads like hand-written CRDs; the rest keep the schema's source order. */
const LEADING_KEYWORDS = ['type', 'description'];

/** Keywords whose value is a map of name → schema, or a schema. */
const SCHEMA_MAP_KEYWORDS = new Set(['properties']);
const SCHEMA_KEYWORDS = new Set(['items', 'additionalProperties', 'not']);
const SCHEMA_LIST_KEYWORDS = new Set(['allOf', 'anyOf', 'oneOf']);

/**
 * The plain JSON Schema of a TypeBox schema: symbol keys dropped (only own enumerable string keys are copied), TypeBox
 * meta keywords removed, `type` and `description` first in each node.
 */
export function toJsonSchema(schema: TSchema): JsonSchema {
  return cleanSchema(schema);
}

function cleanSchema(node: object): JsonSchema {
  const source = node as Record<string, unknown>;
  const keys = Object.keys(source).filter((k) => !DROPPED_KEYWORDS.has(k) && source[k] !== undefined);
  const ordered = [
    ...LEADING_KEYWORDS.filter((k) => keys.includes(k)),
    ...keys.filter((k) => !LEADING_KEYWORDS.includes(k)),
  ];
  const out: JsonSchema = {};
  for (const key of ordered) {
    const value = source[key];
    if (SCHEMA_MAP_KEYWORDS.has(key) && isObject(value)) {
      out[key] = Object.fromEntries(Object.keys(value).map((name) => [name, cleanSchema(value[name] as object)]));
    } else if (SCHEMA_KEYWORDS.has(key) && isObject(value)) {
      out[key] = cleanSchema(value);
    } else if (SCHEMA_LIST_KEYWORDS.has(key) && Array.isArray(value)) {
      out[key] = value.map((v) => cleanSchema(v as object));
    } else {
      out[key] = plain(value);
    }
  }
  return out;
}

/** A deep copy with string keys only (no TypeBox symbols), in source order. */
function plain(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(plain);
  if (!isObject(value)) return value;
  return Object.fromEntries(Object.keys(value).map((k) => [k, plain(value[k])]));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
