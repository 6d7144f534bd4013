import { IngressErrors } from './errors.ts';
import { parseInvocationIdParam, type InvocationQuery } from './ids.ts';
import { checkScope } from './scope.ts';
const VARIANTS = ['workflow', 'idempotentInvocation', 'invocation'] as const;

/**
 * Reads the tagged target body of `POST /restate/attach|output|lookup`:
 * `{"target":"workflow","workflowName","workflowKey","scope"?}`,
 * `{"target":"idempotentInvocation","service","key"?,"handler","idempotencyKey","scope"?}` or
 * `{"target":"invocation","invocationId"}`. Unknown fields are ignored. A body that does not deserialize is restate's
 * 500 `cannot read body: invalid <what> body: <serde message>`; serde's wording (and its `at line L column C` where
 * serde has a position) is reproduced for the usual mistakes.
 */
export function parseTargetBody(body: Buffer, what: 'lookup' | 'request'): InvocationQuery {
  const text = body.toString('utf8');
  const fail = (detail: string): never => {
    throw IngressErrors.unreadableBody(`invalid ${what} body: ${detail}`);
  };

  const start = skipWhitespace(text, 0);
  if (start >= text.length) return fail(`EOF while parsing a value at ${position(text, text.length)}`);
  if (!'{["-0123456789tfn'.includes(text[start]!)) return fail(`expected value at ${position(text, start + 1)}`);
  const end = valueEnd(text, start);
  const trailing = skipWhitespace(text, end);
  let value: unknown;
  try {
    value = JSON.parse(text.slice(start, end));
  } catch (err) {
    return fail((err as Error).message);
  }
  if (trailing < text.length) return fail(`trailing characters at ${position(text, trailing + 1)}`);
  // Targets are looked up in PostgreSQL text, which cannot hold U+0000: no target has one.
  if (text.includes('\\u0000')) throw IngressErrors.nulInTarget(what);

  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return fail(
      `invalid type: ${describe(value)}, expected internally tagged enum InvocationTargetRequest at ${position(text, end)}`,
    );
  }
  const fields = value as Record<string, unknown>;
  if (!('target' in fields)) return fail(`missing field \`target\` at ${position(text, end)}`);
  const target = fields.target;
  const targetEnd = tagValueEnd(text, start);
  if (typeof target !== 'string') {
    return fail(`invalid type: ${describe(target)}, expected variant identifier at ${position(text, targetEnd)}`);
  }
  if (!(VARIANTS as readonly string[]).includes(target)) {
    const expected = VARIANTS.map((v) => `\`${v}\``).join(', ');
    return fail(`unknown variant \`${target}\`, expected one of ${expected} at ${position(text, targetEnd)}`);
  }

  // Past the tag serde reads from buffered content: its messages carry no position any more.
  const required = (name: string): string => {
    if (!(name in fields)) return fail(`missing field \`${name}\``);
    const v = fields[name];
    return typeof v === 'string' ? v : fail(`invalid type: ${describe(v)}, expected a string`);
  };
  const optional = (name: string): string | undefined => {
    const v = fields[name];
    if (v === undefined || v === null) return undefined;
    return typeof v === 'string' ? v : fail(`invalid type: ${describe(v)}, expected a string`);
  };

  switch (target as (typeof VARIANTS)[number]) {
    case 'workflow': {
      const scope = optional('scope');
      const name = required('workflowName');
      const key = required('workflowKey');
      return { kind: 'workflow', name, key, scope: scope === undefined ? undefined : checkScope(scope) };
    }
    case 'idempotentInvocation': {
      const scope = optional('scope');
      const service = required('service');
      const key = optional('key');
      const handler = required('handler');
      const idempotencyKey = required('idempotencyKey');
      return {
        kind: 'idempotency',
        service,
        key,
        handler,
        idempotencyKey,
        scope: scope === undefined ? undefined : checkScope(scope),
      };
    }
    case 'invocation':
      return { kind: 'invocation', id: parseInvocationIdParam(required('invocationId')) };
  }
}

/** serde's `Unexpected` rendering of a JSON value. */
function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return `boolean \`${v}\``;
  if (typeof v === 'number') return Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``;
  if (typeof v === 'string') return `string ${JSON.stringify(v)}`;
  if (Array.isArray(v)) return 'sequence';
  return 'map';
}

/** serde_json's `line L column C` after `consumed` characters. */
function position(text: string, consumed: number): string {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < consumed && i < text.length; i++) {
    if (text.charCodeAt(i) === 0x0a) {
      line++;
      lineStart = i + 1;
    }
  }
  return `line ${line} column ${consumed - lineStart}`;
}

function skipWhitespace(text: string, i: number): number {
  while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  return i;
}

/** End (exclusive) of the JSON value starting at `i`, scanning strings and nesting only (JSON.parse validates). */
function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return stringEnd(text, i);
  if (c !== '{' && c !== '[') {
    while (i < text.length && !' \t\n\r,]}'.includes(text[i]!)) i++;
    return i;
  }
  let depth = 0;
  for (; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === '"') i = stringEnd(text, i) - 1;
    else if (ch === '{' || ch === '[') depth++;
    else if (ch === '}' || ch === ']') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return text.length;
}

function stringEnd(text: string, i: number): number {
  for (i++; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i + 1;
  }
  return text.length;
}

/** End of the value of the top-level `target` member of the object at `start` (where serde reports tag errors). */
function tagValueEnd(text: string, start: number): number {
  let i = skipWhitespace(text, start + 1);
  while (i < text.length && text[i] === '"') {
    const keyEnd = stringEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const valueStart = skipWhitespace(text, skipWhitespace(text, keyEnd) + 1);
    const end = valueEnd(text, valueStart);
    if (key === 'target') return end;
    i = skipWhitespace(text, end);
    if (text[i] === ',') i = skipWhitespace(text, i + 1);
  }
  return text.length;
}
