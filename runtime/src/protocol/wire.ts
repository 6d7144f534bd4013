import { type BinaryReader, type BinaryWriter, WireType } from '@bufbuild/protobuf/wire';

/*
 * proto3 building blocks shared by the message codecs.
 *
 * Readers take the reader positioned after a length prefix plus the end offset of the enclosing message, and check
 * that they stop exactly there. Writers follow proto3 presence: `writeX` leaves a default value out, `writeXPresent`
 * writes whatever is set (proto3 `optional`), oneof members are always written.
 */

// Plain numbers: they are compared with wire types read off the buffer, which are plain numbers too.
export const VARINT: number = WireType.Varint;
export const LEN: number = WireType.LengthDelimited;
export const EMPTY_BYTES: Uint8Array = new Uint8Array(0);

/** Thrown by the readers; `decodeWith` prefixes the message name. */
export class MalformedError extends Error {}

export function expectWire(actual: number, expected: number, field: number): void {
  if (actual !== expected) throw new MalformedError(`field ${field} has wire type ${actual}, expected ${expected}`);
}

export function readU32(r: BinaryReader, wt: number, field: number): number {
  expectWire(wt, VARINT, field);
  return r.uint32();
}

export function readU64(r: BinaryReader, wt: number, field: number): bigint {
  expectWire(wt, VARINT, field);
  const v = r.uint64();
  return typeof v === 'bigint' ? v : BigInt(v);
}

export function readBool(r: BinaryReader, wt: number, field: number): boolean {
  expectWire(wt, VARINT, field);
  return r.bool();
}

export function readBytes(r: BinaryReader, wt: number, field: number): Uint8Array {
  expectWire(wt, LEN, field);
  return r.bytes();
}

export function readString(r: BinaryReader, wt: number, field: number): string {
  expectWire(wt, LEN, field);
  return r.string();
}

/** Repeated u32: proto3 writes them packed, but parsers must accept the unpacked form too. */
export function readU32List(r: BinaryReader, wt: number, field: number, into: number[]): void {
  if (wt === VARINT) {
    into.push(r.uint32());
    return;
  }
  expectWire(wt, LEN, field);
  const end = nestedEnd(r);
  while (r.pos < end) into.push(r.uint32());
  checkEnd(r, end);
}

export function nestedEnd(r: BinaryReader): number {
  const len = r.uint32();
  const end = r.pos + len;
  if (end > r.len) throw new MalformedError('length-delimited field overruns the message');
  return end;
}

export function readNested<T>(
  r: BinaryReader,
  wt: number,
  field: number,
  read: (r: BinaryReader, end: number) => T,
): T {
  expectWire(wt, LEN, field);
  return read(r, nestedEnd(r));
}

export function checkEnd(r: BinaryReader, end: number): void {
  if (r.pos !== end) throw new MalformedError('truncated message');
}

export function skipField(r: BinaryReader, tag: number): void {
  const field = tag >>> 3;
  if (field === 0) throw new MalformedError('illegal field number 0');
  r.skip(tag & 7, field);
}

export function readEmpty(r: BinaryReader, end: number): null {
  while (r.pos < end) skipField(r, r.uint32());
  checkEnd(r, end);
  return null;
}

/** `Value{1 content}` flattened to its bytes. */
export function readValue(r: BinaryReader, end: number): Uint8Array {
  return readBytesField1(r, end, undefined);
}

/** `StateKeys{repeated 1 keys}` flattened to its keys. */
export function readStateKeys(r: BinaryReader, end: number): Uint8Array[] {
  const keys: Uint8Array[] = [];
  readBytesField1(r, end, keys);
  return keys;
}

/** Reads a message whose only field is bytes at 1: returns the last occurrence and collects all into `all`. */
function readBytesField1(r: BinaryReader, end: number, all: Uint8Array[] | undefined): Uint8Array {
  let last = EMPTY_BYTES;
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag >>> 3 !== 1) {
      skipField(r, tag);
      continue;
    }
    last = readBytes(r, tag & 7, 1);
    if (all !== undefined) all.push(last);
  }
  checkEnd(r, end);
  return last;
}

export function missing(what: string): never {
  throw new MalformedError(`missing ${what}`);
}

export function varintSize(v: number): number {
  if (v < 0x80) return 1;
  if (v < 0x4000) return 2;
  if (v < 0x200000) return 3;
  if (v < 0x10000000) return 4;
  return 5;
}

export function tagOf(field: number, wt: number): number {
  return ((field << 3) | wt) >>> 0;
}

export function writeU32(w: BinaryWriter, field: number, v: number): void {
  if (v !== 0) w.uint32(tagOf(field, VARINT)).uint32(v);
}

export function writeU32Present(w: BinaryWriter, field: number, v: number | undefined): void {
  if (v !== undefined) w.uint32(tagOf(field, VARINT)).uint32(v);
}

export function writeU64(w: BinaryWriter, field: number, v: bigint): void {
  if (v !== 0n) w.uint32(tagOf(field, VARINT)).uint64(v);
}

export function writeU64Present(w: BinaryWriter, field: number, v: bigint | undefined): void {
  if (v !== undefined) w.uint32(tagOf(field, VARINT)).uint64(v);
}

export function writeBool(w: BinaryWriter, field: number, v: boolean): void {
  if (v) w.uint32(tagOf(field, VARINT)).bool(true);
}

export function writeString(w: BinaryWriter, field: number, v: string): void {
  if (v.length !== 0) w.uint32(tagOf(field, LEN)).string(v);
}

export function writeStringPresent(w: BinaryWriter, field: number, v: string | undefined): void {
  if (v !== undefined) w.uint32(tagOf(field, LEN)).string(v);
}

export function writeBytes(w: BinaryWriter, field: number, v: Uint8Array): void {
  if (v.length !== 0) w.uint32(tagOf(field, LEN)).bytes(v);
}

export function writePackedU32(w: BinaryWriter, field: number, vs: readonly number[]): void {
  if (vs.length === 0) return;
  w.uint32(tagOf(field, LEN)).fork();
  for (const v of vs) w.uint32(v);
  w.join();
}

export function writeEmpty(w: BinaryWriter, field: number): void {
  w.uint32(tagOf(field, LEN)).uint32(0);
}

/** `Value{1 content}`; the length is computed up front because fork/join would shift large payloads. */
export function writeValue(w: BinaryWriter, field: number, content: Uint8Array): void {
  w.uint32(tagOf(field, LEN));
  const n = content.length;
  if (n === 0) {
    w.uint32(0);
    return;
  }
  w.uint32(1 + varintSize(n) + n)
    .uint32(tagOf(1, LEN))
    .bytes(content);
}

export function writeMessage<T>(w: BinaryWriter, field: number, write: (w: BinaryWriter, m: T) => void, m: T): void {
  w.uint32(tagOf(field, LEN)).fork();
  write(w, m);
  w.join();
}

export function writeStateKeys(w: BinaryWriter, keys: readonly Uint8Array[]): void {
  for (const key of keys) w.uint32(tagOf(1, LEN)).bytes(key);
}
