import type { ColumnType } from './column-types.ts';
import type { QueryResult } from './query.ts';
import { parseArray, parseBytea, parseInterval, parseTimestamp } from './values.ts';

/**
 * `{"rows":[…]}` as restate-server writes it (arrow-json): NULL columns are left out of the row object, integers are
 * bare JSON numbers even past 2^53 (`"partition_key":10780549832979785780`), timestamps `2026-11-21T20:44:03.304Z`,
 * durations ISO 8601 (`PT7200S`), binary as lowercase hex, lists as arrays.
 */

/** chrono's ISO 8601 duration: whole seconds, milliseconds only when there are some. */
export function isoDuration(ms: number): string {
  const sign = ms < 0 ? '-' : '';
  const abs = Math.abs(ms);
  const seconds = Math.floor(abs / 1000);
  const millis = abs % 1000;
  return `${sign}PT${seconds}${millis === 0 ? '' : `.${String(millis).padStart(3, '0')}`}S`;
}

function timestampJson(text: string, withZone: boolean): string {
  const ms = parseTimestamp(text);
  if (ms === undefined) return JSON.stringify(text);
  const iso = new Date(ms).toISOString();
  return JSON.stringify(withZone ? iso : iso.slice(0, -1));
}

function integerJson(text: string): string {
  // PostgreSQL prints integers (and integral numerics) as plain digits, which JSON takes as they are.
  return /^-?\d+$/.test(text) ? text : JSON.stringify(text);
}

function floatJson(text: string): string {
  const n = Number(text);
  return Number.isFinite(n) ? String(n) : 'null';
}

export function jsonValue(type: ColumnType, text: string): string {
  switch (type) {
    case 'UInt64':
    case 'UInt32':
    case 'Int64':
      return integerJson(text);
    case 'Float64':
      return floatJson(text);
    case 'Boolean':
      return text === 't' || text === 'true' ? 'true' : 'false';
    case 'Utf8':
    case 'LargeUtf8':
      return JSON.stringify(text);
    case 'LargeBinary':
      return JSON.stringify(parseBytea(text).toString('hex'));
    case 'TimestampMs':
      return timestampJson(text, true);
    case 'TimestampMsNaive':
      return timestampJson(text, false);
    case 'DurationMs': {
      const ms = parseInterval(text);
      return ms === undefined ? JSON.stringify(text) : JSON.stringify(isoDuration(ms));
    }
    case 'List<LargeUtf8>':
      return `[${parseArray(text)
        .map((e) => (e === null ? 'null' : JSON.stringify(e)))
        .join(',')}]`;
    case 'List<UInt32>':
    case 'List<Int64>':
      return `[${parseArray(text)
        .map((e) => (e === null ? 'null' : integerJson(e)))
        .join(',')}]`;
  }
}

export function renderJson(result: QueryResult): Buffer {
  const names = result.columns.map((c) => JSON.stringify(c.name));
  const parts: string[] = [];
  for (const row of result.rows) {
    const fields: string[] = [];
    for (let i = 0; i < result.columns.length; i++) {
      const value = row[i];
      if (value === null || value === undefined) continue;
      fields.push(`${names[i]}:${jsonValue(result.columns[i]!.type, value)}`);
    }
    parts.push(`{${fields.join(',')}}`);
  }
  return Buffer.from(`{"rows":[${parts.join(',')}]}`, 'utf8');
}
