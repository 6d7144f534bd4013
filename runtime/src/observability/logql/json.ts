/*
 * JSON for the `| json` stages, read the way Loki's parser (buger/jsonparser) reads it: values are slices of the line,
 * so numbers keep their text (`1.0` stays `1.0`) and `| json fields` yields the object exactly as written.
 */
import { ObservabilityQueryError } from '../errors.ts';
import type { JsonPath } from './ast.ts';

export type JsonType = 'string' | 'number' | 'boolean' | 'null' | 'object' | 'array';

class JsonSyntaxError extends Error {}

function ws(s: string, i: number): number {
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

function fail(s: string, i: number): never {
  throw new JsonSyntaxError(`unexpected ${i >= s.length ? 'end of input' : JSON.stringify(s[i])} at offset ${i}`);
}

function scanString(s: string, i: number): number {
  i++;
  while (i < s.length) {
    const c = s[i];
    if (c === '"') return i + 1;
    i += c === '\\' ? 2 : 1;
  }
  return fail(s, i);
}

/** The end of the value starting at `i` (whitespace skipped) and its type. */
function scanValue(s: string, i: number): { start: number; end: number; type: JsonType } {
  i = ws(s, i);
  const c = s[i];
  if (c === '"') return { start: i, end: scanString(s, i), type: 'string' };
  if (c === '{') return { start: i, end: eachEntry(s, i, () => undefined), type: 'object' };
  if (c === '[') return { start: i, end: eachElement(s, i, () => undefined), type: 'array' };
  for (const [word, type] of [
    ['true', 'boolean'],
    ['false', 'boolean'],
    ['null', 'null'],
  ] as const) {
    if (s.startsWith(word, i)) return { start: i, end: i + word.length, type };
  }
  const m = /-?(?:\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  m.lastIndex = i;
  if (m.exec(s) !== null && m.lastIndex > i) return { start: i, end: m.lastIndex, type: 'number' };
  return fail(s, i);
}

type Visit = (key: string, start: number, end: number, type: JsonType) => void;

function eachEntry(s: string, i: number, visit: Visit): number {
  i = ws(s, i + 1);
  if (s[i] === '}') return i + 1;
  for (;;) {
    if (s[i] !== '"') fail(s, i);
    const keyEnd = scanString(s, i);
    const key = decodeString(s.slice(i, keyEnd));
    i = ws(s, keyEnd);
    if (s[i] !== ':') fail(s, i);
    const v = scanValue(s, i + 1);
    visit(key, v.start, v.end, v.type);
    i = ws(s, v.end);
    if (s[i] === '}') return i + 1;
    if (s[i] !== ',') fail(s, i);
    i = ws(s, i + 1);
  }
}

function eachElement(s: string, i: number, visit: (index: number, start: number, end: number, type: JsonType) => void) {
  i = ws(s, i + 1);
  if (s[i] === ']') return i + 1;
  for (let n = 0; ; n++) {
    const v = scanValue(s, i);
    visit(n, v.start, v.end, v.type);
    i = ws(s, v.end);
    if (s[i] === ']') return i + 1;
    if (s[i] !== ',') fail(s, i);
    i++;
  }
}

function decodeString(raw: string): string {
  if (!raw.includes('\\')) return raw.slice(1, -1);
  try {
    return JSON.parse(raw) as string;
  } catch {
    throw new JsonSyntaxError(`invalid string ${raw}`);
  }
}

/** A value's label text: strings unescaped, numbers and booleans as written, objects and arrays as their JSON. */
function valueText(s: string, start: number, end: number, type: JsonType): string {
  if (type === 'string') return decodeString(s.slice(start, end));
  if (type === 'null') return '';
  return s.slice(start, end);
}

/** A label name from JSON keys: characters outside [a-zA-Z0-9_] become `_`, a leading digit gets a `_` before it. */
export function sanitizeLabelName(key: string): string {
  const s = key.trim().replace(/[^a-zA-Z0-9_]/g, '_');
  return /^[0-9]/.test(s) ? `_${s}` : s;
}

/**
 * `| json`: every string, number and boolean of the object, nested keys joined with `_`; arrays and nulls are
 * skipped, as in Loki. Throws a message for `__error_details__` when the line is not a JSON object.
 */
export function flattenJson(line: string): [string, string][] | string {
  const out: [string, string][] = [];
  const walk = (prefix: string, start: number) =>
    eachEntry(line, start, (key, vs, ve, type) => {
      const name = prefix === '' ? sanitizeLabelName(key) : `${prefix}_${key.replace(/[^a-zA-Z0-9_]/g, '_')}`;
      if (type === 'object') walk(name, vs);
      else if (type === 'string' || type === 'number' || type === 'boolean') {
        out.push([name, valueText(line, vs, ve, type)]);
      }
    });
  try {
    const i = ws(line, 0);
    if (line[i] !== '{') fail(line, i);
    walk('', i);
  } catch (err) {
    if (err instanceof JsonSyntaxError) return err.message;
    throw err;
  }
  return out;
}

/** `| json a="x.y[0]"`: the value at the path (empty when absent), or an error message when the line is not JSON. */
export function extractJsonPaths(line: string, paths: readonly JsonPath[]): string[] | string {
  try {
    const root = scanValue(line, 0);
    if (root.type !== 'object' && root.type !== 'array') fail(line, root.start);
    return paths.map((path) => {
      let cur: { start: number; end: number; type: JsonType } | undefined = root;
      for (const step of path) {
        const at: { start: number; end: number; type: JsonType } = cur;
        cur = undefined;
        if (typeof step === 'string' && at.type === 'object') {
          eachEntry(line, at.start, (k, start, end, type) => {
            if (k === step) cur = { start, end, type };
          });
        } else if (typeof step === 'number' && at.type === 'array') {
          eachElement(line, at.start, (n, start, end, type) => {
            if (n === step) cur = { start, end, type };
          });
        }
        if (cur === undefined) return '';
      }
      return valueText(line, cur.start, cur.end, cur.type);
    });
  } catch (err) {
    if (err instanceof JsonSyntaxError) return err.message;
    throw err;
  }
}

/** The top-level string fields of a JSON object (for `| unpack`), or an error message. */
export function topLevelStrings(line: string): [string, string][] | string {
  const out: [string, string][] = [];
  try {
    const i = ws(line, 0);
    if (line[i] !== '{') fail(line, i);
    eachEntry(line, i, (key, start, end, type) => {
      if (type === 'string') out.push([key, decodeString(line.slice(start, end))]);
    });
  } catch (err) {
    if (err instanceof JsonSyntaxError) return err.message;
    throw err;
  }
  return out;
}

/** A JSON expression of `| json label="expr"`: `a.b`, `a[0]`, `a["b.c"]`, `["a"].b`. */
export function parseJsonPath(expr: string): JsonPath {
  const path: (string | number)[] = [];
  const re = /\s*(?:([A-Za-z_][A-Za-z0-9_-]*)|\[\s*(\d+)\s*\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]|(\.))/y;
  let i = 0;
  let expectField = true;
  while (i < expr.length) {
    re.lastIndex = i;
    const m = re.exec(expr);
    if (m === null) break;
    i = re.lastIndex;
    if (m[4] !== undefined) {
      if (expectField) break;
      expectField = true;
      continue;
    }
    if (m[1] !== undefined) {
      if (!expectField) break;
      path.push(m[1]);
    } else if (m[2] !== undefined) path.push(Number(m[2]));
    else {
      try {
        path.push(JSON.parse(`"${m[3]}"`) as string);
      } catch {
        // A control character or a bad escape inside the quoted field name.
        throw new ObservabilityQueryError(`parse error : invalid JSON expression ${JSON.stringify(expr)}`);
      }
    }
    expectField = false;
  }
  if (i < expr.trimEnd().length || path.length === 0 || expectField) {
    throw new ObservabilityQueryError(`parse error : invalid JSON expression ${JSON.stringify(expr)}`);
  }
  return path;
}
