/*
 * The typed syntax tree of the TraceQL subset the Tempo API answers (see parse.ts for what is refused). Built from the
 * lezer tree of @grafana/lezer-traceql; evaluated by evaluate.ts.
 */

export type StatusName = 'unset' | 'ok' | 'error';
export type KindName = 'unspecified' | 'internal' | 'server' | 'client' | 'producer' | 'consumer';

/** A typed TraceQL value: a literal, or what a field evaluates to on one span. */
export type Value =
  | { readonly type: 'string'; readonly value: string }
  | { readonly type: 'int' | 'float'; readonly value: number }
  | { readonly type: 'bool'; readonly value: boolean }
  | { readonly type: 'duration'; readonly value: bigint }
  | { readonly type: 'status'; readonly value: StatusName }
  | { readonly type: 'kind'; readonly value: KindName }
  | { readonly type: 'nil' };

export type AttributeScope = 'span' | 'resource' | 'unscoped' | 'event' | 'link' | 'instrumentation';

/** Intrinsics by their canonical name; `span:name` is `name`, `trace:rootService` is `rootServiceName`, … */
export type IntrinsicName =
  | 'name'
  | 'status'
  | 'statusMessage'
  | 'duration'
  | 'kind'
  | 'rootName'
  | 'rootServiceName'
  | 'traceDuration'
  | 'trace:id'
  | 'span:id'
  | 'span:parentID'
  | 'event:name'
  | 'event:timeSinceStart'
  | 'link:traceID'
  | 'link:spanID'
  | 'instrumentation:name'
  | 'instrumentation:version';

export interface AttributeField {
  readonly kind: 'attribute';
  readonly scope: AttributeScope;
  /** The attribute's name, quotes removed (`."x y"` is `x y`). Aliases are resolved at evaluation. */
  readonly name: string;
  /** `parent.…`: the attribute of the span's parent. */
  readonly parent: boolean;
  /** As written in the query (keys of `select()` and `by()` output). */
  readonly text: string;
}

export interface IntrinsicField {
  readonly kind: 'intrinsic';
  readonly name: IntrinsicName;
  readonly text: string;
}

export type Field = AttributeField | IntrinsicField;

export type ComparisonOp = '=' | '!=' | '<' | '<=' | '>' | '>=' | '=~' | '!~';
export type ArithmeticOp = '+' | '-' | '*' | '/' | '%' | '^';
export type BinaryOp = ComparisonOp | ArithmeticOp | '&&' | '||';

/** The expression inside `{ … }`, evaluated per span. */
export type FieldExpr =
  | Field
  | { readonly kind: 'static'; readonly value: Value }
  | { readonly kind: 'binary'; readonly op: BinaryOp; readonly left: FieldExpr; readonly right: FieldExpr }
  | { readonly kind: 'not'; readonly operand: FieldExpr }
  | { readonly kind: 'negate'; readonly operand: FieldExpr };

export type AggregateFn = 'count' | 'avg' | 'min' | 'max' | 'sum';

/** Left side of `| count() > 2`: evaluated per spanset. */
export type ScalarExpr =
  | { readonly kind: 'aggregate'; readonly fn: AggregateFn; readonly field: FieldExpr | null }
  | { readonly kind: 'number'; readonly value: Value }
  | { readonly kind: 'arith'; readonly op: ArithmeticOp; readonly left: ScalarExpr; readonly right: ScalarExpr };

export type StructuralOp = '>' | '<' | '>>' | '<<' | '~';

/** A spanset pipeline: every node maps a list of spansets (one per trace at the start) to a list of spansets. */
export type SpansetExpr =
  | { readonly kind: 'filter'; readonly expr: FieldExpr | null }
  | { readonly kind: 'and' | 'or'; readonly left: SpansetExpr; readonly right: SpansetExpr }
  | {
      readonly kind: 'structural';
      readonly op: StructuralOp;
      /** `!>>` and friends: the right-hand spans that are *not* so related. */
      readonly negated: boolean;
      /** `&>>` and friends: both sides' related spans. */
      readonly union: boolean;
      readonly left: SpansetExpr;
      readonly right: SpansetExpr;
    }
  | { readonly kind: 'pipe'; readonly left: SpansetExpr; readonly right: SpansetExpr }
  | { readonly kind: 'scalarFilter'; readonly op: ComparisonOp; readonly left: ScalarExpr; readonly right: ScalarExpr }
  | { readonly kind: 'select'; readonly fields: readonly Field[] }
  | { readonly kind: 'by'; readonly fields: readonly FieldExpr[]; readonly text: string }
  | { readonly kind: 'coalesce' };

export interface TraceQLQuery {
  readonly root: SpansetExpr;
  /** Query hints `with(most_recent=true)`: accepted, recorded, not acted on (results are newest first anyway). */
  readonly hints: Readonly<Record<string, boolean>>;
}
