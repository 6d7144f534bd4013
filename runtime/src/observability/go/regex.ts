/*
 * RE2 regexes (Go's regexp, as Loki and Tempo use them) turned into JS RegExps: leading flag groups such as `(?i)`
 * become flags, `(?P<name>` named groups, `[[:alpha:]]` classes, `\z` and `\A` are translated. Compiled regexes are
 * cached: a query applies one regex to many lines or spans.
 */
import { ObservabilityQueryError } from '../errors.ts';

const POSIX_CLASSES: Readonly<Record<string, string>> = {
  alnum: '0-9A-Za-z',
  alpha: 'A-Za-z',
  ascii: '\\x00-\\x7F',
  blank: '\\t ',
  cntrl: '\\x00-\\x1F\\x7F',
  digit: '0-9',
  graph: '!-~',
  lower: 'a-z',
  print: ' -~',
  punct: '!-/:-@[-`{-~',
  space: '\\t\\n\\v\\f\\r ',
  upper: 'A-Z',
  word: '0-9A-Za-z_',
  xdigit: '0-9A-Fa-f',
};

const FLAG_GROUP = /^\(\?([imsU]+)\)/;
const cache = new Map<string, RegExp>();
const CACHE_LIMIT = 2000;

export interface Re2Options {
  /** Wrap in `^(?:…)$`: label matchers and TraceQL match whole values; LogQL line filters do not. */
  readonly anchored: boolean;
  /** `.` also matches a newline (LogQL's regexp parser stage). */
  readonly dotAll?: boolean;
  /** Starts the message of a refusal, naming the query language (`invalid TraceQL query: `). */
  readonly errorPrefix?: string;
}

/** The RE2 regex `source` as a JS RegExp; an invalid or unsupported regex is the query's fault: 400. */
export function re2(source: string, options: Re2Options): RegExp {
  const { anchored, dotAll = false, errorPrefix = '' } = options;
  const key = `${anchored ? 'a' : 'u'}${dotAll ? 's' : ''}${errorPrefix}\u0000${source}`;
  const cached = cache.get(key);
  if (cached !== undefined) return cached;
  const invalid = (why: string): ObservabilityQueryError =>
    new ObservabilityQueryError(`${errorPrefix}invalid regex ${JSON.stringify(source)}: ${why}`);
  let flags = dotAll ? 's' : '';
  let body = source;
  for (let m = FLAG_GROUP.exec(body); m !== null; m = FLAG_GROUP.exec(body)) {
    for (const f of m[1]!) {
      if (f === 'U') throw invalid('the U flag is not supported');
      if (!flags.includes(f)) flags += f;
    }
    body = body.slice(m[0].length);
  }
  body = body
    .replace(/\(\?P</g, '(?<')
    .replace(/\[:(\^?)([a-z]+):\]/g, (all, neg: string, name: string) => {
      const cls = POSIX_CLASSES[name];
      if (cls === undefined) return all;
      return neg === '' ? cls : `^${cls}`;
    })
    .replace(/\\z/g, '$')
    .replace(/\\A/g, '^');
  let re: RegExp;
  try {
    re = new RegExp(anchored ? `^(?:${body})$` : body, flags);
  } catch (err) {
    throw invalid((err as Error).message);
  }
  if (cache.size > CACHE_LIMIT) cache.clear();
  cache.set(key, re);
  return re;
}
