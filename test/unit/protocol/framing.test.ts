import { describe, expect, it } from 'vitest';
import { MessageTooLargeError } from '../../../runtime/src/protocol/errors.ts';
import {
  DEFAULT_MAX_MESSAGE_SIZE,
  FrameDecoder,
  REQUESTED_ACK_FLAG,
  encodeFrame,
  encodeFrameHeader,
  hasRequestedAck,
} from '../../../runtime/src/protocol/framing.ts';
import type { Frame } from '../../../runtime/src/protocol/framing.ts';

const summary = (frames: Frame[]): [number, number, string][] =>
  frames.map((f) => [f.type, f.flags, f.payload.toString('hex')]);

describe('framing', () => {
  it('encodes the big-endian header', () => {
    expect(encodeFrame(0x0005, Buffer.from('0801', 'hex'), REQUESTED_ACK_FLAG).toString('hex')).toBe(
      '00058000000000020801',
    );
    expect(encodeFrame(0x0003, new Uint8Array(0)).toString('hex')).toBe('0003000000000000');
    expect(encodeFrameHeader(0xfbff, 0x01020304).toString('hex')).toBe('fbff000001020304');
    expect(hasRequestedAck(0x8000)).toBe(true);
    expect(hasRequestedAck(0)).toBe(false);
  });

  it('slices frames packed in one chunk without copying', () => {
    const chunk = Buffer.concat([
      encodeFrame(0x0400, Buffer.from('7200', 'hex')),
      encodeFrame(0x0003, new Uint8Array(0)),
      encodeFrame(0x800c, Buffer.from('08022200', 'hex')),
    ]);
    const frames = new FrameDecoder().push(chunk);
    expect(summary(frames)).toEqual([
      [0x0400, 0, '7200'],
      [0x0003, 0, ''],
      [0x800c, 0, '08022200'],
    ]);
    expect(frames[0]!.payload.buffer).toBe(chunk.buffer);
  });

  it('reassembles headers and payloads split at every possible position', () => {
    const stream = Buffer.concat([
      encodeFrame(0x0411, Buffer.from('5801620d6d616b652d6772656574696e67', 'hex')),
      encodeFrame(0x0005, Buffer.from('0801720d2248656c6c6f20416c69636522', 'hex'), 0x8000),
      encodeFrame(0x0003, new Uint8Array(0)),
    ]);
    const expected = summary(new FrameDecoder().push(stream));
    expect(expected.length).toBe(3);
    for (let a = 0; a <= stream.length; a++) {
      for (let b = a; b <= stream.length; b++) {
        const decoder = new FrameDecoder();
        const frames = [
          ...decoder.push(stream.subarray(0, a)),
          ...decoder.push(stream.subarray(a, b)),
          ...decoder.push(stream.subarray(b)),
        ];
        expect(summary(frames), `${a}/${b}`).toEqual(expected);
        expect(decoder.hasRemainder()).toBe(false);
        expect(decoder.bufferedBytes).toBe(0);
      }
    }
  });

  it('reports a truncated stream', () => {
    const decoder = new FrameDecoder();
    const frame = encodeFrame(0x0401, Buffer.from('7203', 'hex'));
    expect(decoder.push(frame.subarray(0, 5))).toEqual([]);
    expect(decoder.hasRemainder()).toBe(true);
    expect(decoder.push(frame.subarray(5, 9))).toEqual([]);
    expect(decoder.bufferedBytes).toBe(9);
    expect(summary(decoder.push(frame.subarray(9)))).toEqual([[0x0401, 0, '7203']]);
    expect(decoder.hasRemainder()).toBe(false);
  });

  it('throws MessageTooLargeError as soon as the header declares too much', () => {
    const decoder = new FrameDecoder({ maxMessageSize: 16 });
    expect(summary(decoder.push(encodeFrame(0x0400, Buffer.alloc(16))))).toHaveLength(1);
    const header = encodeFrameHeader(0x0401, 17);
    expect(decoder.push(header.subarray(0, 6))).toEqual([]);
    let error: unknown;
    try {
      decoder.push(header.subarray(6));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MessageTooLargeError);
    expect(error).toMatchObject({ declaredSize: 17, maxSize: 16, messageType: 0x0401 });
    expect((error as Error).message).toBe('message of type 0x0401 declares 17 bytes, more than the limit of 16 bytes');

    expect(() => new FrameDecoder().push(encodeFrameHeader(0x0400, DEFAULT_MAX_MESSAGE_SIZE + 1))).toThrow(
      MessageTooLargeError,
    );
  });

  it('reassembles a large payload that arrives in many chunks', () => {
    const payload = Buffer.alloc(1_000_000);
    for (let i = 0; i < payload.length; i++) payload[i] = i & 0xff;
    const stream = Buffer.concat([encodeFrame(0x0401, payload), encodeFrame(0x0003, new Uint8Array(0))]);
    const decoder = new FrameDecoder();
    const frames: Frame[] = [];
    for (let offset = 0; offset < stream.length; offset += 16 * 1024) {
      frames.push(...decoder.push(stream.subarray(offset, offset + 16 * 1024)));
    }
    expect(frames.map((f) => f.type)).toEqual([0x0401, 0x0003]);
    expect(frames[0]!.payload.equals(payload)).toBe(true);
    expect(decoder.hasRemainder()).toBe(false);
  });
});
