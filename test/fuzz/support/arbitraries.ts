import fc from 'fast-check';

/**
 * Structure-aware inputs: valid values taken apart by a few random edits (the inputs that get furthest into a
 * parser), and the characters and byte patterns parsers trip over.
 */

/** Characters and fragments that break naive parsing: encodings, separators, quotes, controls, unicode oddities. */
export const NASTY_FRAGMENTS = [
  '%',
  '%2',
  '%2F',
  '%2f',
  '%00',
  '%FF',
  '%C3',
  '%C3%28',
  '%E2%82',
  '%F0%9F%98%80',
  '%ZZ',
  '%%',
  '+',
  '/',
  '//',
  '/./',
  '/../',
  '\\',
  '?',
  '#',
  '&',
  '=',
  ';',
  ',',
  ':',
  '"',
  "'",
  '`',
  '{',
  '}',
  '[',
  ']',
  '(',
  ')',
  '|',
  '!',
  '~',
  '*',
  '$',
  '\0',
  '\t',
  '\n',
  '\r\n',
  ' ',
  '\u00a0',
  'é',
  'ß',
  '日本',
  '𝄞',
  '😀',
  '\u202e',
  '\ufeff',
  '\ud800',
  '\udfff',
  '\u0085',
  '\u2028',
  'null',
  'true',
  '-1',
  '0',
  '1e309',
  '9007199254740993',
  '-0',
  'NaN',
  '__proto__',
  'constructor',
  'toString',
] as const;

export const nastyFragment: fc.Arbitrary<string> = fc.constantFrom(...NASTY_FRAGMENTS);

/** Text of any kind: printable, binary, unicode, and fragments of the list above. */
export const nastyString = (maxLength = 40): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ maxLength }),
    fc.string({ unit: 'binary', maxLength }),
    fc.string({ unit: 'grapheme', maxLength }),
    fc.array(fc.oneof(nastyFragment, fc.string({ maxLength: 4 })), { maxLength: 8 }).map((parts) => parts.join('')),
  );

interface Edit {
  readonly kind: 'delete' | 'insert' | 'replace' | 'duplicate' | 'truncate' | 'swap';
  readonly at: number;
  readonly length: number;
  readonly text: string;
}

const edit = (insert: fc.Arbitrary<string>): fc.Arbitrary<Edit> =>
  fc.record({
    kind: fc.constantFrom('delete', 'insert', 'replace', 'duplicate', 'truncate', 'swap'),
    at: fc.nat(),
    length: fc.integer({ min: 1, max: 16 }),
    text: insert,
  });

function applyEdit(s: string, e: Edit): string {
  const at = s.length === 0 ? 0 : e.at % (s.length + 1);
  const end = Math.min(s.length, at + e.length);
  switch (e.kind) {
    case 'delete':
      return s.slice(0, at) + s.slice(end);
    case 'insert':
      return s.slice(0, at) + e.text + s.slice(at);
    case 'replace':
      return s.slice(0, at) + e.text + s.slice(end);
    case 'duplicate':
      return s.slice(0, end) + s.slice(at, end) + s.slice(end);
    case 'truncate':
      return s.slice(0, at);
    case 'swap': {
      const other = s.length === 0 ? 0 : (e.at * 7919 + e.length) % s.length;
      const [a, b] = at <= other ? [at, other] : [other, at];
      if (a === b || b >= s.length) return s;
      return s.slice(0, a) + s[b]! + s.slice(a + 1, b) + s[a]! + s.slice(b + 1);
    }
  }
}

/** One of `valid`, possibly edited a few times (insertions drawn from `insert`, by default nasty text). */
export function mutatedString(valid: fc.Arbitrary<string>, insert = nastyString(12)): fc.Arbitrary<string> {
  return fc
    .tuple(valid, fc.array(edit(insert), { maxLength: 4 }))
    .map(([s, edits]) => edits.reduce((acc, e) => applyEdit(acc, e), s));
}

interface ByteEdit {
  readonly kind: 'flip' | 'set' | 'insert' | 'delete' | 'truncate' | 'duplicate' | 'set32';
  readonly at: number;
  readonly value: number;
  readonly bytes: Uint8Array;
}

const byteEdit: fc.Arbitrary<ByteEdit> = fc.record({
  kind: fc.constantFrom('flip', 'set', 'insert', 'delete', 'truncate', 'duplicate', 'set32'),
  at: fc.nat(),
  value: fc.oneof(
    fc.nat({ max: 255 }),
    fc.constantFrom(0, 0x7f, 0x80, 0xff, 0xffffffff, 0x7fffffff, 0x80000000, 0x10000, 0xfffffffe),
  ),
  bytes: fc.uint8Array({ maxLength: 12 }),
});

function applyByteEdit(b: Uint8Array, e: ByteEdit): Uint8Array {
  const at = b.length === 0 ? 0 : e.at % (b.length + 1);
  const within = Math.min(at, Math.max(0, b.length - 1));
  switch (e.kind) {
    case 'flip': {
      if (b.length === 0) return b;
      const out = Uint8Array.from(b);
      out[within] = out[within]! ^ (1 << (e.value % 8));
      return out;
    }
    case 'set': {
      if (b.length === 0) return b;
      const out = Uint8Array.from(b);
      out[within] = e.value & 0xff;
      return out;
    }
    case 'set32': {
      // A big-endian length or count field overwritten with an edge value.
      if (b.length < 4) return b;
      const out = Uint8Array.from(b);
      new DataView(out.buffer).setUint32(Math.min(within, b.length - 4), e.value >>> 0);
      return out;
    }
    case 'insert':
      return concat(b.subarray(0, at), e.bytes, b.subarray(at));
    case 'delete':
      return concat(b.subarray(0, at), b.subarray(Math.min(b.length, at + 1 + (e.value % 16))));
    case 'truncate':
      return b.subarray(0, at);
    case 'duplicate': {
      const end = Math.min(b.length, at + 1 + (e.value % 32));
      return concat(b.subarray(0, end), b.subarray(at, end), b.subarray(end));
    }
  }
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** One of `valid`, possibly edited a few times at the byte level (bit flips, edge values, cuts, insertions). */
export function mutatedBytes(valid: fc.Arbitrary<Uint8Array>, maxEdits = 4): fc.Arbitrary<Uint8Array> {
  return fc
    .tuple(valid, fc.array(byteEdit, { maxLength: maxEdits }))
    .map(([b, edits]) => edits.reduce((acc, e) => applyByteEdit(acc, e), b));
}

/** Cut points splitting a buffer into chunks, as a network would deliver it. */
export function chunked(bytes: Uint8Array, cuts: readonly number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => (bytes.length === 0 ? 0 : c % bytes.length)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    if (p > from) chunks.push(Buffer.from(bytes.subarray(from, p)));
    from = Math.max(from, p);
  }
  if (from < bytes.length) chunks.push(Buffer.from(bytes.subarray(from)));
  return chunks;
}

/** JSON values of any shape, including the awkward ones (deep nesting, huge numbers, unicode keys). */
export const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, -1e-308, '', [], {}) },
  { weight: 1, arbitrary: nastyString() },
);

/** `valid` or, at a random place, a value of another type: objects whose fields each may have the wrong type. */
export function sometimes<T>(valid: fc.Arbitrary<T>, weight = 3): fc.Arbitrary<unknown> {
  return fc.oneof({ weight, arbitrary: valid }, { weight: 1, arbitrary: anyJson });
}
