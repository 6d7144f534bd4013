/*
 * The typed AST of the LogQL subset we evaluate, built from Grafana's lezer grammar (parse.ts). Regexes and templates
 * are compiled at parse time, so an invalid one is a 400 before any data is read.
 */
import type { LabelMatcher } from '../model.ts';
import type { Template } from './template.ts';

export type Expr = LogQuery | MetricExpr;

/** `{matchers} <stages>`. */
export interface LogQuery {
  readonly kind: 'log';
  readonly matchers: readonly LabelMatcher[];
  readonly stages: readonly Stage[];
}

export type Stage =
  | LineFilterStage
  | JsonStage
  | LogfmtStage
  | RegexpStage
  | PatternStage
  | UnpackStage
  | LabelFilterStage
  | LineFormatStage
  | LabelFormatStage
  | DropKeepStage
  | DecolorizeStage;

/** `|= "a"`, `!~ "b"`, `|> "<_> c"`, with `or` alternatives: `|= "a" or "b"` matches either, `!= "a" or "b"` neither. */
export interface LineFilterStage {
  readonly kind: 'lineFilter';
  readonly op: '|=' | '!=' | '|~' | '!~' | '|>' | '!>';
  readonly values: readonly string[];
}

/** A path into a JSON document: object keys and array indexes. */
export type JsonPath = readonly (string | number)[];

/** `| json` (all keys, flattened) or `| json a, b="x.y"` (named extractions). */
export interface JsonStage {
  readonly kind: 'json';
  readonly extractions: readonly { readonly label: string; readonly path: JsonPath }[];
}

/** `| logfmt [--strict] [--keep-empty] [a, b="key"]`. */
export interface LogfmtStage {
  readonly kind: 'logfmt';
  readonly strict: boolean;
  readonly keepEmpty: boolean;
  readonly extractions: readonly { readonly label: string; readonly key: string }[];
}

/** `| regexp "(?P<name>…)"`: named groups become labels. */
export interface RegexpStage {
  readonly kind: 'regexp';
  readonly regex: RegExp;
}

/** `| pattern "<ip> - <_> <status>"`. */
export interface PatternStage {
  readonly kind: 'pattern';
  readonly regex: RegExp;
  readonly names: readonly (string | undefined)[];
}

export interface UnpackStage {
  readonly kind: 'unpack';
}

export interface DecolorizeStage {
  readonly kind: 'decolorize';
}

export type CompareOp = '>' | '>=' | '<' | '<=' | '==' | '!=';

export type LabelFilter =
  | { readonly kind: 'match'; readonly matcher: LabelMatcher }
  | { readonly kind: 'number'; readonly name: string; readonly op: CompareOp; readonly value: number }
  | { readonly kind: 'duration'; readonly name: string; readonly op: CompareOp; readonly seconds: number }
  | { readonly kind: 'bytes'; readonly name: string; readonly op: CompareOp; readonly bytes: number }
  | { readonly kind: 'and' | 'or'; readonly left: LabelFilter; readonly right: LabelFilter };

export interface LabelFilterStage {
  readonly kind: 'labelFilter';
  readonly filter: LabelFilter;
}

export interface LineFormatStage {
  readonly kind: 'lineFormat';
  readonly template: Template;
}

/** `| label_format dst=src` (rename) or `dst="{{…}}"` (template). */
export interface LabelFormatStage {
  readonly kind: 'labelFormat';
  readonly items: readonly (
    { readonly dst: string; readonly rename: string } | { readonly dst: string; readonly template: Template }
  )[];
}

/** `| drop a, b="x"` / `| keep a, b="x"`: by name, or by name and value. */
export interface DropKeepStage {
  readonly kind: 'drop' | 'keep';
  readonly items: readonly { readonly name: string; readonly matcher?: LabelMatcher }[];
}

export type MetricExpr = RangeAggregation | VectorAggregation | BinaryOp | NumberLiteral | VectorLiteral | LabelReplace;

export type RangeOp =
  | 'count_over_time'
  | 'rate'
  | 'bytes_over_time'
  | 'bytes_rate'
  | 'sum_over_time'
  | 'avg_over_time'
  | 'min_over_time'
  | 'max_over_time'
  | 'first_over_time'
  | 'last_over_time'
  | 'stddev_over_time'
  | 'stdvar_over_time'
  | 'quantile_over_time';

export interface Grouping {
  readonly without: boolean;
  readonly labels: readonly string[];
}

export interface Unwrap {
  readonly label: string;
  readonly conversion: 'none' | 'bytes' | 'duration' | 'duration_seconds';
  readonly filters: readonly LabelFilter[];
}

/** `count_over_time({…} | … [5m] offset 1m)`, `avg_over_time({…} | unwrap x [1m]) by (a)`. */
export interface RangeAggregation {
  readonly kind: 'range';
  readonly op: RangeOp;
  readonly param: number | undefined;
  readonly log: LogQuery;
  readonly rangeNs: bigint;
  readonly offsetNs: bigint;
  readonly unwrap: Unwrap | undefined;
  readonly grouping: Grouping | undefined;
}

export type VectorOp =
  'sum' | 'avg' | 'count' | 'min' | 'max' | 'stddev' | 'stdvar' | 'topk' | 'bottomk' | 'sort' | 'sort_desc';

export interface VectorAggregation {
  readonly kind: 'vagg';
  readonly op: VectorOp;
  readonly param: number | undefined;
  readonly grouping: Grouping | undefined;
  readonly expr: MetricExpr;
}

export type BinaryOpName =
  'or' | 'and' | 'unless' | '+' | '-' | '*' | '/' | '%' | '^' | '==' | '!=' | '>' | '>=' | '<' | '<=';

/** Vector matching of a binary operation: `on (a)` / `ignoring (a)`, `group_left (b)` / `group_right (b)`. */
export interface VectorMatching {
  readonly on: boolean;
  readonly labels: readonly string[];
  readonly group: { readonly side: 'left' | 'right'; readonly include: readonly string[] } | undefined;
}

export interface BinaryOp {
  readonly kind: 'binop';
  readonly op: BinaryOpName;
  readonly bool: boolean;
  readonly matching: VectorMatching | undefined;
  readonly left: MetricExpr;
  readonly right: MetricExpr;
}

export interface NumberLiteral {
  readonly kind: 'number';
  readonly value: number;
}

/** `vector(1)`: a vector of one sample without labels at every step. */
export interface VectorLiteral {
  readonly kind: 'vector';
  readonly value: number;
}

/** `label_replace(v, "dst", "replacement", "src", "regex")`. */
export interface LabelReplace {
  readonly kind: 'labelReplace';
  readonly expr: MetricExpr;
  readonly dst: string;
  readonly replacement: string;
  readonly src: string;
  readonly regex: RegExp;
}
