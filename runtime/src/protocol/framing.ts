import { MessageTooLargeError } from './errors.ts';

/**
 * Service-protocol framing: every message is an 8-byte big-endian header (u16 type, u16 flags, u32 payload length)
 * followed by the protobuf payload.
 */

export const FRAME_HEADER_SIZE = 8;

/** Header flag asking the peer to acknowledge the message (V7: set by the SDK on ProposeRunCompletion). */
export const REQUESTED_ACK_FLAG = 0x8000;

/** Restate's default limit for a single protocol message; callers normally pass the configured value. */
export const DEFAULT_MAX_MESSAGE_SIZE = 32 * 1024 * 1024;

export interface Frame {
  type: number;
  flags: number;
  /** May share memory with the chunk it arrived in; copy it if it must outlive that chunk's reuse. */
  payload: Buffer;
}

export function hasRequestedAck(flags: number): boolean {
  return (flags & REQUESTED_ACK_FLAG) !== 0;
}

export function encodeFrameHeader(type: number, length: number, flags = 0): Buffer {
  const header = Buffer.allocUnsafe(FRAME_HEADER_SIZE);
  header.writeUInt16BE(type, 0);
  header.writeUInt16BE(flags, 2);
  header.writeUInt32BE(length, 4);
  return header;
}

export function encodeFrame(type: number, payload: Uint8Array, flags = 0): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER_SIZE + payload.length);
  frame.writeUInt16BE(type, 0);
  frame.writeUInt16BE(flags, 2);
  frame.writeUInt32BE(payload.length, 4);
  frame.set(payload, FRAME_HEADER_SIZE);
  return frame;
}

export interface FrameDecoderOptions {
  /** Largest accepted payload (header excluded), in bytes. */
  maxMessageSize?: number;
}

const EMPTY = Buffer.alloc(0);

/**
 * Incremental decoder for a frame stream whose chunk boundaries are arbitrary.
 *
 * Frames that lie inside one chunk are returned as views of it; bytes are copied only when a header or payload
 * straddles chunks. After a `MessageTooLargeError` the stream position is lost, so the decoder must be discarded.
 */
export class FrameDecoder {
  private readonly maxMessageSize: number;
  /** Unconsumed input: `chunks[0]` starts at `headOffset`, the rest are whole. */
  private chunks: Buffer[] = [];
  private headOffset = 0;
  private buffered = 0;
  private readonly scratchHeader = Buffer.allocUnsafe(FRAME_HEADER_SIZE);

  constructor(options: FrameDecoderOptions = {}) {
    this.maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
  }

  /** Feeds one chunk and returns every frame it completed, in stream order. */
  push(chunk: Buffer): Frame[] {
    const frames: Frame[] = [];
    if (chunk.length === 0) return frames;
    if (this.buffered === 0) {
      this.parseFresh(chunk, frames);
    } else {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
      this.drain(frames);
    }
    return frames;
  }

  /** True when bytes of an incomplete frame are buffered, i.e. the stream would be truncated if it ended now. */
  hasRemainder(): boolean {
    return this.buffered > 0;
  }

  get bufferedBytes(): number {
    return this.buffered;
  }

  private checkSize(type: number, length: number): void {
    if (length > this.maxMessageSize) throw new MessageTooLargeError(type, length, this.maxMessageSize);
  }

  /** Common case: nothing buffered, so frames can be sliced straight out of the chunk. */
  private parseFresh(chunk: Buffer, frames: Frame[]): void {
    let offset = 0;
    const end = chunk.length;
    while (end - offset >= FRAME_HEADER_SIZE) {
      const type = chunk.readUInt16BE(offset);
      const length = chunk.readUInt32BE(offset + 4);
      this.checkSize(type, length);
      const payloadStart = offset + FRAME_HEADER_SIZE;
      if (end - payloadStart < length) break;
      frames.push({
        type,
        flags: chunk.readUInt16BE(offset + 2),
        payload: chunk.subarray(payloadStart, payloadStart + length),
      });
      offset = payloadStart + length;
    }
    if (offset < end) {
      this.chunks.push(chunk);
      this.headOffset = offset;
      this.buffered = end - offset;
    }
  }

  private drain(frames: Frame[]): void {
    while (this.buffered >= FRAME_HEADER_SIZE) {
      const header = this.peekHeader();
      const type = header.readUInt16BE(0);
      const flags = header.readUInt16BE(2);
      const length = header.readUInt32BE(4);
      this.checkSize(type, length);
      if (this.buffered - FRAME_HEADER_SIZE < length) return;
      this.skip(FRAME_HEADER_SIZE);
      frames.push({ type, flags, payload: this.take(length) });
    }
  }

  /** The next 8 bytes, without consuming them; only copies when the header straddles chunks. */
  private peekHeader(): Buffer {
    const first = this.chunks[0]!;
    if (first.length - this.headOffset >= FRAME_HEADER_SIZE) {
      return first.subarray(this.headOffset, this.headOffset + FRAME_HEADER_SIZE);
    }
    let written = 0;
    let offset = this.headOffset;
    for (let i = 0; written < FRAME_HEADER_SIZE; i++) {
      const chunk = this.chunks[i]!;
      const count = Math.min(chunk.length - offset, FRAME_HEADER_SIZE - written);
      written += chunk.copy(this.scratchHeader, written, offset, offset + count);
      offset = 0;
    }
    return this.scratchHeader;
  }

  private skip(n: number): void {
    let remaining = n;
    let dropped = 0;
    while (remaining > 0) {
      const available = this.chunks[dropped]!.length - this.headOffset;
      if (available > remaining) {
        this.headOffset += remaining;
        break;
      }
      remaining -= available;
      this.headOffset = 0;
      dropped++;
    }
    this.consumed(n, dropped);
  }

  private take(n: number): Buffer {
    if (n === 0) return EMPTY;
    const first = this.chunks[0]!;
    const start = this.headOffset;
    if (first.length - start >= n) {
      const payload = first.subarray(start, start + n);
      if (start + n === first.length) {
        this.headOffset = 0;
        this.consumed(n, 1);
      } else {
        this.headOffset = start + n;
        this.consumed(n, 0);
      }
      return payload;
    }
    const payload = Buffer.allocUnsafe(n);
    let written = 0;
    let dropped = 0;
    while (written < n) {
      const chunk = this.chunks[dropped]!;
      const count = Math.min(chunk.length - this.headOffset, n - written);
      chunk.copy(payload, written, this.headOffset, this.headOffset + count);
      written += count;
      if (this.headOffset + count === chunk.length) {
        this.headOffset = 0;
        dropped++;
      } else {
        this.headOffset += count;
      }
    }
    this.consumed(n, dropped);
    return payload;
  }

  private consumed(bytes: number, droppedChunks: number): void {
    this.buffered -= bytes;
    if (droppedChunks > 0) this.chunks.splice(0, droppedChunks);
    if (this.buffered === 0) this.reset();
  }

  private reset(): void {
    this.chunks = [];
    this.headOffset = 0;
    this.buffered = 0;
  }
}
