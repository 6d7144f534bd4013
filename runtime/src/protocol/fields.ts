import type { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';
import {
  checkEnd,
  missing,
  readBool,
  readBytes,
  readNested,
  readString,
  readU32,
  readU32List,
  readU64,
  readValue,
  skipField,
  writeBool,
  writeBytes,
  writeMessage,
  writePackedU32,
  writeString,
  writeStringPresent,
  writeU32,
  writeU32Present,
  writeU64,
  writeU64Present,
  writeValue,
} from './wire.ts';

/*
 * Table-driven proto3 message codec: a message is declared once as a list of field specs, and one reader and one
 * writer serve every message. The reader dispatches on the field number through a dense table, the writer walks the
 * specs in ascending field-number order; neither allocates beyond the decoded values themselves.
 */

/** A message (or a flattened wrapper such as `Value`) read from / written to its own length-delimited bytes. */
export interface NestedCodec<T> {
  read(this: void, r: BinaryReader, end: number): T;
  write(this: void, w: BinaryWriter, m: T): void;
}

/**
 * A oneof held in one property as a discriminated union. `read` gets the member's field number and the spec's first
 * member (`base`), `write` writes whichever member is set.
 */
export interface UnionCodec<U> {
  read(r: BinaryReader, wt: number, field: number, base: number): U;
  write(w: BinaryWriter, base: number, u: U): void;
}

/**
 * How one kind of field is read and written. `read` gets the property's current value (`prev`) and returns the new
 * one, so repeated kinds append to the list they are given; `write` leaves out what proto3 leaves out.
 */
interface FieldKind {
  read(r: BinaryReader, wt: number, no: number, s: FieldSpec<unknown>, prev: unknown): unknown;
  write(w: BinaryWriter, no: number, v: unknown, s: FieldSpec<unknown>): void;
}

/** A repeated field: one `item` per occurrence, each written whatever its value. */
function listOf(item: FieldKind): FieldKind {
  return {
    read: (r, wt, no, s, prev) => {
      (prev as unknown[]).push(item.read(r, wt, no, s, undefined));
      return prev;
    },
    write: (w, no, items, s) => {
      for (const v of items as unknown[]) item.write(w, no, v, s);
    },
  };
}

// `opt` kinds are proto3 `optional` (written whenever set); plain scalars leave their default value out.
const U32: FieldKind = { read: readU32, write: writeU32 };
const OPT_U32: FieldKind = { read: readU32, write: writeU32Present };
const U64: FieldKind = { read: readU64, write: writeU64 };
const OPT_U64: FieldKind = { read: readU64, write: writeU64Present };
const BOOL: FieldKind = { read: readBool, write: writeBool };
const STRING: FieldKind = { read: readString, write: writeString };
const OPT_STRING: FieldKind = { read: readString, write: writeStringPresent };
const BYTES: FieldKind = { read: readBytes, write: writeBytes };
/** `Value{1 content}` flattened to its bytes; always written. */
const VALUE: FieldKind = { read: (r, wt, no) => readNested(r, wt, no, readValue), write: writeValue };
const PACKED_U32: FieldKind = {
  read: (r, wt, no, _s, prev) => {
    readU32List(r, wt, no, prev as number[]);
    return prev;
  },
  write: writePackedU32,
};
/** A message-typed field: written when set, even when empty. */
const MESSAGE: FieldKind = {
  read: (r, wt, no, s) => readNested(r, wt, no, s.nested!.read),
  write: (w, no, v, s) => {
    if (v !== undefined) writeMessage(w, no, s.nested!.write, v);
  },
};
const ONEOF: FieldKind = {
  read: (r, wt, no, s) => s.union!.read(r, wt, no, s.no),
  write: (w, no, v, s) => s.union!.write(w, no, v),
};

type Key<T> = Extract<keyof T, string>;

/** Every spec has the same shape (all properties set), so the codec loops see one hidden class. */
export interface FieldSpec<T> {
  readonly no: number;
  readonly key: Key<T>;
  readonly kind: FieldKind;
  /** Protocol version the field appeared in; writers for an older peer leave it out. */
  readonly since: number;
  /** Set on required oneofs and messages: what `missing` reports when the message ends without them. */
  readonly required: string | undefined;
  readonly members: readonly number[];
  readonly nested: NestedCodec<unknown> | undefined;
  readonly union: UnionCodec<unknown> | undefined;
}

function spec<T>(
  no: number,
  key: Key<T>,
  kind: FieldKind,
  nested?: NestedCodec<unknown>,
  union?: UnionCodec<unknown>,
  members: readonly number[] = [no],
  required?: string,
  since = 0,
): FieldSpec<T> {
  return { no, key, kind, since, required, members, nested, union };
}

type Simple = <T>(no: number, key: Key<T>) => FieldSpec<T>;
const simple =
  (kind: FieldKind): Simple =>
  (no, key) =>
    spec(no, key, kind);

export const u32 = simple(U32);
export const optU32 = simple(OPT_U32);
export const u64 = simple(U64);
export const optU64 = simple(OPT_U64);
export const bool = simple(BOOL);
export const str = simple(STRING);
export const optStr = simple(OPT_STRING);
export const bytes = simple(BYTES);
export const value = simple(VALUE);
export const packedU32 = simple(PACKED_U32);
/** Repeated string: every item is written, even an empty one. */
export const strings = simple(listOf(OPT_STRING));

const MESSAGES = listOf(MESSAGE);
export const repeated = <T>(no: number, key: Key<T>, codec: NestedCodec<unknown>): FieldSpec<T> =>
  spec(no, key, MESSAGES, codec);
export const message = <T>(no: number, key: Key<T>, codec: NestedCodec<unknown>, required?: string): FieldSpec<T> =>
  spec(no, key, MESSAGE, codec, undefined, [no], required);

/** A required oneof whose members sit at `members` (ascending); it is written at the first member's position. */
export const oneof = <T>(
  key: Key<T>,
  members: readonly number[],
  union: UnionCodec<unknown>,
  what: string,
): FieldSpec<T> => spec(members[0] ?? 0, key, ONEOF, undefined, union, members, what);

/** Marks a field as added in protocol `version`. */
export const since = <T>(version: number, s: FieldSpec<T>): FieldSpec<T> =>
  spec(s.no, s.key, s.kind, s.nested, s.union, s.members, s.required, version);

/** What a reader starts from: every non-optional property at its default, required oneofs still unset. */
export type Draft<T> = { [K in keyof T]: T[K] | undefined };

type Fields = Record<string, unknown>;

export class MessageSchema<T> implements NestedCodec<T> {
  /** Specs by field number, `undefined` for numbers the message does not know. */
  private readonly byNo: (FieldSpec<T> | undefined)[];
  /** Specs in ascending field-number order, the order they are written in. */
  private readonly fields: readonly FieldSpec<T>[];
  private readonly required: readonly FieldSpec<T>[];

  constructor(
    private readonly init: () => Draft<T>,
    fields: readonly FieldSpec<T>[],
  ) {
    this.fields = [...fields].sort((a, b) => a.no - b.no);
    this.required = fields.filter((s) => s.required !== undefined);
    const max = Math.max(0, ...fields.flatMap((s) => s.members));
    this.byNo = Array.from({ length: max + 1 }, () => undefined);
    for (const s of fields) {
      for (const no of s.members) {
        if (this.byNo[no] !== undefined) throw new Error(`field ${no} is declared twice`);
        this.byNo[no] = s;
      }
    }
  }

  readonly read = (r: BinaryReader, end: number): T => {
    const m = this.init() as Fields;
    const byNo = this.byNo;
    while (r.pos < end) {
      const tag = r.uint32();
      const no = tag >>> 3;
      const s = no < byNo.length ? byNo[no] : undefined;
      if (s === undefined) skipField(r, tag);
      else m[s.key] = s.kind.read(r, tag & 7, no, s as FieldSpec<unknown>, m[s.key]);
    }
    checkEnd(r, end);
    const required = this.required;
    for (let i = 0; i < required.length; i++) {
      const s = required[i]!;
      if (m[s.key] === undefined) missing(s.required!);
    }
    return m as T;
  };

  /** With a `version`, fields that version cannot carry are left out. */
  readonly write = (w: BinaryWriter, m: T, version?: number): void => {
    const fields = this.fields;
    for (let i = 0; i < fields.length; i++) {
      const s = fields[i]!;
      if (version === undefined || version >= s.since)
        s.kind.write(w, s.no, (m as Fields)[s.key], s as FieldSpec<unknown>);
    }
  };
}
