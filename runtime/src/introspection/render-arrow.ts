import {
  Bool,
  DurationMillisecond,
  Field,
  Float64,
  Int64,
  LargeBinary,
  LargeUtf8,
  List,
  RecordBatch,
  Schema,
  Struct,
  Table,
  TimestampMillisecond,
  Uint32,
  Uint64,
  Utf8,
  makeBuilder,
  makeData,
  tableToIPC,
  type Data,
  type DataType,
} from 'apache-arrow';
import type { ColumnType } from './column-types.ts';
import type { QueryResult } from './query.ts';
import { parseArray, parseBytea, parseInterval, parseTimestamp } from './values.ts';

/**
 * The Arrow IPC stream restate-server answers `POST /query` with when JSON was not asked for: one schema with
 * restate's column types, then the rows in one record batch. `restate sql` prints it; the CLI's counters read
 * column 0 of the first batch as Int64.
 */

function arrowType(type: ColumnType): DataType {
  switch (type) {
    case 'UInt64':
      return new Uint64();
    case 'UInt32':
      return new Uint32();
    case 'Int64':
      return new Int64();
    case 'Float64':
      return new Float64();
    case 'Boolean':
      return new Bool();
    case 'Utf8':
      return new Utf8();
    case 'LargeUtf8':
      return new LargeUtf8();
    case 'LargeBinary':
      return new LargeBinary();
    case 'TimestampMs':
      return new TimestampMillisecond('+00:00');
    case 'TimestampMsNaive':
      return new TimestampMillisecond();
    case 'DurationMs':
      return new DurationMillisecond();
    case 'List<LargeUtf8>':
      return new List(new Field('item', new LargeUtf8(), true));
    case 'List<UInt32>':
      return new List(new Field('item', new Uint32(), true));
    case 'List<Int64>':
      return new List(new Field('item', new Int64(), true));
  }
}

function integer(text: string): bigint | null {
  return /^-?\d+$/.test(text) ? BigInt(text) : null;
}

/** A value as the builder of its Arrow type takes it. */
function arrowValue(type: ColumnType, text: string): unknown {
  switch (type) {
    case 'UInt64':
    case 'Int64':
      return integer(text);
    case 'UInt32': {
      const n = integer(text);
      return n === null ? null : Number(n);
    }
    case 'Float64':
      return Number(text);
    case 'Boolean':
      return text === 't' || text === 'true';
    case 'Utf8':
    case 'LargeUtf8':
      return text;
    case 'LargeBinary':
      return new Uint8Array(parseBytea(text));
    case 'TimestampMs':
    case 'TimestampMsNaive':
      return parseTimestamp(text) ?? null;
    case 'DurationMs': {
      const ms = parseInterval(text);
      return ms === undefined ? null : BigInt(ms);
    }
    case 'List<LargeUtf8>':
      return parseArray(text);
    case 'List<UInt32>':
      return parseArray(text).map((e) => (e === null ? null : Number(e)));
    case 'List<Int64>':
      return parseArray(text).map((e) => (e === null ? null : integer(e)));
  }
}

export function renderArrow(result: QueryResult): Uint8Array {
  const fields = result.columns.map((c) => new Field(c.name, arrowType(c.type), c.nullable));
  const schema = new Schema(fields);
  const children: Data[] = result.columns.map((column, index): Data => {
    const builder = makeBuilder({ type: fields[index]!.type, nullValues: [null, undefined] });
    for (const row of result.rows) {
      const text = row[index];
      builder.append(text === null || text === undefined ? null : arrowValue(column.type, text));
    }
    return builder.finish().flush() as Data;
  });
  const length = result.rows.length;
  const batch = new RecordBatch(schema, makeData({ type: new Struct(fields), length, nullCount: 0, children }));
  return tableToIPC(new Table(schema, batch), 'stream');
}
