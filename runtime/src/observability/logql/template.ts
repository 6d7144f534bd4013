/*
 * The Go text/template subset of `line_format` and `label_format`: literal text, label references `{{.name}}` /
 * `{{ .name }}` (a missing label is empty, as Loki's `missingkey=zero`), `{{ __line__ }}`, trim markers `{{-` `-}}`,
 * comments `{{/* … *\/}}` and a few one-argument functions piped in (`{{ .a | ToUpper }}`). Anything else is refused
 * with a 400 when the query is parsed.
 */
import { ObservabilityQueryError } from '../errors.ts';

type Fn = (s: string) => string;

const FUNCTIONS: Record<string, Fn> = {
  ToUpper: (s) => s.toUpperCase(),
  ToLower: (s) => s.toLowerCase(),
  upper: (s) => s.toUpperCase(),
  lower: (s) => s.toLowerCase(),
  TrimSpace: (s) => s.trim(),
  trim: (s) => s.trim(),
  title: (s) => s.replace(/(^|[^\p{L}\p{N}])(\p{L})/gu, (_, a: string, b: string) => a + b.toUpperCase()),
};

type Part =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'label'; readonly name: string; readonly fns: readonly Fn[] }
  | { readonly kind: 'line'; readonly fns: readonly Fn[] };

export interface Template {
  readonly source: string;
  readonly parts: readonly Part[];
}

/** What a template may read: the entry's labels and its current line. */
export interface TemplateData {
  readonly labels: ReadonlyMap<string, string>;
  readonly line: string;
}

function unsupported(source: string, action: string, stage: string): ObservabilityQueryError {
  return new ObservabilityQueryError(
    `invalid ${stage} template ${JSON.stringify(source)}: unsupported action {{${action}}} ` +
      `(supported: {{.label}}, {{__line__}}, and the functions ${Object.keys(FUNCTIONS).join(', ')})`,
  );
}

export function compileTemplate(source: string, stage = 'line_format'): Template {
  const parts: Part[] = [];
  let i = 0;
  while (i < source.length) {
    const open = source.indexOf('{{', i);
    if (open < 0) {
      parts.push({ kind: 'text', text: source.slice(i) });
      break;
    }
    let text = source.slice(i, open);
    let start = open + 2;
    if (/^-\s/.test(source.slice(start))) {
      text = text.replace(/\s+$/, '');
      start += 1;
    }
    if (text !== '') parts.push({ kind: 'text', text });
    const close = source.indexOf('}}', start);
    if (close < 0) {
      throw new ObservabilityQueryError(`invalid ${stage} template ${JSON.stringify(source)}: unclosed action`);
    }
    let end = close;
    let trimRight = false;
    if (/\s-$/.test(source.slice(start, close))) {
      end -= 1;
      trimRight = true;
    }
    const action = source.slice(start, end).trim();
    i = close + 2;
    if (trimRight) while (i < source.length && /\s/.test(source[i]!)) i++;
    if (action.startsWith('/*') && action.endsWith('*/')) continue;
    parts.push(compileAction(source, action, stage));
  }
  return { source, parts };
}

function compileAction(source: string, action: string, stage: string): Part {
  const [head = '', ...pipes] = action.split('|').map((p) => p.trim());
  const fns = pipes.map((name) => {
    const fn = FUNCTIONS[name];
    if (fn === undefined) throw unsupported(source, action, stage);
    return fn;
  });
  if (head === '__line__') return { kind: 'line', fns };
  const m = /^\.([A-Za-z_][A-Za-z0-9_]*)$/.exec(head);
  if (m === null) throw unsupported(source, action, stage);
  return { kind: 'label', name: m[1]!, fns };
}

export function renderTemplate(t: Template, data: TemplateData): string {
  let out = '';
  for (const p of t.parts) {
    let v: string;
    if (p.kind === 'text') {
      out += p.text;
      continue;
    } else if (p.kind === 'line') {
      v = data.line;
    } else {
      v = data.labels.get(p.name) ?? '';
    }
    for (const fn of p.fns) v = fn(v);
    out += v;
  }
  return out;
}
