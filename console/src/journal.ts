/**
 * What the timeline says of a journal entry, read from its protocol bytes (`sys_journal.raw`, hex): which completion a
 * command waits for, and what a notification brought (a value, a failure, void, an invocation id). Commands and
 * notifications are protobuf messages; only the few fields the timeline shows are read (service protocol §5).
 */

export interface EntryInfo {
  /** A command's `result_completion_id` (field 11). */
  readonly awaits?: number;
  /** A notification's completion id (field 1), signal index (2) or signal name (3). */
  readonly completes?: number;
  readonly signal?: string;
  /** A notification's (or an Output command's) result. */
  readonly result?:
    { kind: 'value'; text: string } | { kind: 'failure'; code: number; message: string } | { kind: 'void' };
}

type Field = { n: number; varint?: bigint; bytes?: Uint8Array };

function hexBytes(hex: string): Uint8Array {
  const clean = hex.startsWith('\\x') ? hex.slice(2) : hex;
  const out = new Uint8Array(clean.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** The top-level fields of a protobuf message (varints and length-delimited ones; others are skipped). */
function fields(b: Uint8Array): Field[] {
  const out: Field[] = [];
  let pos = 0;
  const varint = (): bigint => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      if (pos >= b.length) throw new Error('truncated');
      const byte = b[pos++]!;
      v |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return v;
      shift += 7n;
      if (shift > 63n) throw new Error('varint too long');
    }
  };
  while (pos < b.length) {
    const tag = varint();
    const n = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    if (wire === 0) out.push({ n, varint: varint() });
    else if (wire === 2) {
      const len = Number(varint());
      if (pos + len > b.length) throw new Error('truncated');
      out.push({ n, bytes: b.subarray(pos, pos + len) });
      pos += len;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else throw new Error('bad wire type');
  }
  return out;
}

const utf8 = new TextDecoder('utf-8', { fatal: false });

function valueText(bytes: Uint8Array): string {
  // Value { bytes content = 1 }
  const content = fields(bytes).find((f) => f.n === 1)?.bytes ?? new Uint8Array();
  return utf8.decode(content);
}

function failureOf(bytes: Uint8Array): { kind: 'failure'; code: number; message: string } {
  const f = fields(bytes);
  return {
    kind: 'failure',
    code: Number(f.find((x) => x.n === 1)?.varint ?? 0n),
    message: utf8.decode(f.find((x) => x.n === 2)?.bytes ?? new Uint8Array()),
  };
}

export function entryInfo(entryType: string, rawHex: string | null | undefined): EntryInfo | undefined {
  if (rawHex === null || rawHex === undefined || rawHex === '') return undefined;
  try {
    const f = fields(hexBytes(rawHex));
    const get = (n: number) => f.find((x) => x.n === n);
    if (entryType.startsWith('Notification')) {
      const id = get(1)?.varint;
      const idx = get(2)?.varint;
      const name = get(3)?.bytes;
      const value = get(5)?.bytes;
      const failure = get(6)?.bytes;
      const invocation = get(16)?.bytes;
      const result: EntryInfo['result'] =
        value !== undefined
          ? { kind: 'value', text: valueText(value) }
          : failure !== undefined
            ? failureOf(failure)
            : invocation !== undefined
              ? { kind: 'value', text: utf8.decode(invocation) }
              : get(4) !== undefined
                ? { kind: 'void' }
                : undefined;
      return {
        ...(id === undefined ? {} : { completes: Number(id) }),
        ...(idx !== undefined ? { signal: `signal ${idx}` } : name !== undefined ? { signal: utf8.decode(name) } : {}),
        ...(result === undefined ? {} : { result }),
      };
    }
    if (entryType === 'Command: Output') {
      const value = get(14)?.bytes;
      const failure = get(15)?.bytes;
      if (value !== undefined) return { result: { kind: 'value', text: valueText(value) } };
      if (failure !== undefined) return { result: failureOf(failure) };
      return {};
    }
    const awaits = get(11)?.varint;
    return awaits === undefined ? {} : { awaits: Number(awaits) };
  } catch {
    return undefined;
  }
}
