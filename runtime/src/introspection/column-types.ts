/**
 * The column types of introspection results, named as restate-server reports them (Arrow data types, see
 * shared/spec/introspection-tables.md). They decide both renderings of a result: the Arrow IPC schema and the JSON
 * value format (restate's Arrow JSON writer).
 */
export type ColumnType =
  | 'UInt64'
  | 'UInt32'
  | 'Int64'
  | 'Float64'
  | 'Boolean'
  | 'Utf8'
  | 'LargeUtf8'
  | 'LargeBinary'
  /** `Timestamp(ms, "+00:00")` */
  | 'TimestampMs'
  /** `Timestamp(ms)`, for PostgreSQL's `timestamp without time zone` */
  | 'TimestampMsNaive'
  /** `Duration(ms)` */
  | 'DurationMs'
  | 'List<LargeUtf8>'
  | 'List<UInt32>'
  | 'List<Int64>';

/** What `information_schema.columns.data_type` says in restate-server for each type. */
export function arrowTypeName(type: ColumnType): string {
  switch (type) {
    case 'TimestampMs':
      return 'Timestamp(ms, "+00:00")';
    case 'TimestampMsNaive':
      return 'Timestamp(ms)';
    case 'DurationMs':
      return 'Duration(ms)';
    case 'List<LargeUtf8>':
      return 'List(LargeUtf8)';
    case 'List<UInt32>':
      return 'List(UInt32)';
    case 'List<Int64>':
      return 'List(Int64)';
    case 'UInt64':
    case 'UInt32':
    case 'Int64':
    case 'Float64':
    case 'Boolean':
    case 'Utf8':
    case 'LargeUtf8':
    case 'LargeBinary':
      return type;
  }
}

/** The PostgreSQL type a view column of this type has (its expression is cast to it). */
export function pgTypeOf(type: ColumnType): string {
  switch (type) {
    case 'UInt64':
    case 'UInt32':
    case 'Int64':
      return 'bigint';
    case 'Float64':
      return 'double precision';
    case 'Boolean':
      return 'boolean';
    case 'Utf8':
    case 'LargeUtf8':
      return 'text';
    case 'LargeBinary':
      return 'bytea';
    case 'TimestampMs':
      return 'timestamptz';
    case 'TimestampMsNaive':
      return 'timestamp';
    case 'DurationMs':
      return 'interval';
    case 'List<LargeUtf8>':
      return 'text[]';
    case 'List<UInt32>':
    case 'List<Int64>':
      return 'bigint[]';
  }
}
