/*
 * The text parsers of a pipeline besides JSON: logfmt (go-logfmt's decoder), pattern (Loki's `<name>` captures) and
 * the ANSI stripping of `decolorize`.
 */
import { ObservabilityQueryError } from '../errors.ts';
import { unquote } from './literals.ts';

export interface LogfmtPair {
  readonly key: string;
  /** Undefined for a standalone key (`key` without `=`). */
  readonly value: string | undefined;
}

/**
 * The key/value pairs of a logfmt line. A malformed pair is skipped (the rest is still read) unless `strict`, which
 * stops at it; `error` says what was wrong.
 */
export function parseLogfmt(line: string, strict: boolean): { pairs: LogfmtPair[]; error: string | undefined } {
  const pairs: LogfmtPair[] = [];
  let error: string | undefined;
  let i = 0;
  const n = line.length;
  const isSpace = (c: string | undefined) => c !== undefined && c <= ' ';
  const skipGarbage = () => {
    while (i < n && !isSpace(line[i])) i++;
  };
  while (i < n) {
    while (i < n && isSpace(line[i])) i++;
    if (i >= n) break;
    const keyStart = i;
    while (i < n && !isSpace(line[i]) && line[i] !== '=' && line[i] !== '"') i++;
    if (i === keyStart || line[i] === '"') {
      error ??= `logfmt syntax error at pos ${i + 1} : unexpected ${JSON.stringify(line[i])}`;
      if (strict) break;
      skipGarbage();
      continue;
    }
    const key = line.slice(keyStart, i);
    if (line[i] !== '=') {
      pairs.push({ key, value: undefined });
      continue;
    }
    i++;
    if (line[i] === '"') {
      const start = i;
      i++;
      while (i < n && line[i] !== '"') i += line[i] === '\\' ? 2 : 1;
      if (i >= n) {
        error ??= `logfmt syntax error at pos ${n + 1} : unterminated quoted value`;
        break;
      }
      i++;
      try {
        pairs.push({ key, value: unquote(line.slice(start, i)) });
      } catch {
        error ??= `logfmt syntax error at pos ${start + 1} : invalid quoted value`;
        if (strict) break;
      }
      continue;
    }
    const valueStart = i;
    while (i < n && !isSpace(line[i]) && line[i] !== '=' && line[i] !== '"') i++;
    if (i < n && !isSpace(line[i])) {
      error ??= `logfmt syntax error at pos ${i + 1} : unexpected ${JSON.stringify(line[i])}`;
      if (strict) break;
      skipGarbage();
      continue;
    }
    pairs.push({ key, value: line.slice(valueStart, i) });
  }
  return { pairs, error };
}

/**
 * A pattern (`<ip> - <_> "<method> <path>"`) as a regex anchored at the start: each capture takes the shortest text up
 * to the next literal, a capture at the end the rest of the line. `names[i]` is the label of group i+1 (undefined for
 * `<_>`). A parser pattern needs a named capture; two captures in a row are refused, as in Loki.
 */
export function compilePattern(pattern: string, forFilter: boolean): { regex: RegExp; names: (string | undefined)[] } {
  const tokens = pattern.split(/(<[A-Za-z_][A-Za-z0-9_]*>)/).filter((t) => t !== '');
  const names: (string | undefined)[] = [];
  let source = '^';
  let previousCapture = false;
  tokens.forEach((token, index) => {
    const capture = /^<([A-Za-z_][A-Za-z0-9_]*)>$/.exec(token);
    if (capture === null) {
      source += token.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
      previousCapture = false;
      return;
    }
    if (previousCapture) {
      throw new ObservabilityQueryError(
        `parse error : invalid pattern ${JSON.stringify(pattern)}: consecutive captures`,
      );
    }
    previousCapture = true;
    const name = capture[1]!;
    names.push(name === '_' ? undefined : name);
    source += index === tokens.length - 1 ? '(.*)' : '(.*?)';
  });
  if (!forFilter && names.every((n) => n === undefined)) {
    throw new ObservabilityQueryError(
      `parse error : invalid pattern ${JSON.stringify(pattern)}: at least one capture is required`,
    );
  }
  return { regex: new RegExp(source, 's'), names };
}

const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]/g;

export function decolorize(line: string): string {
  return line.replace(ANSI, '');
}
