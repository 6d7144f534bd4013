import type { Duplex } from 'node:stream';
import { MAX_STARTUP_PACKET, ProtocolViolation, type Message } from './messages.ts';

/** The peer closed its end (or the socket failed) before the expected message arrived. */
export class PeerClosed extends Error {
  override readonly name = 'PeerClosed';
}

/** More than this many unread bytes pauses the socket: the handshake only ever needs one small message at a time. */
const HIGH_WATER = 64 * 1024;

/**
 * Reads whole startup packets and messages from a socket during the handshake, with the socket's 'data' events
 * feeding a buffer. `detach()` hands the socket back (paused) with whatever was read but not consumed, for the relay
 * or for a TLS upgrade.
 */
export class HandshakeReader {
  private buffer: Buffer = Buffer.alloc(0);
  private wake: (() => void) | undefined;
  private failure: Error | undefined;
  private ended = false;

  private readonly onData = (chunk: Buffer): void => {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    if (this.buffer.length > HIGH_WATER) this.socket.pause();
    this.notify();
  };
  private readonly onEnd = (): void => {
    this.ended = true;
    this.notify();
  };
  private readonly onError = (err: Error): void => {
    this.failure = err;
    this.notify();
  };

  constructor(private readonly socket: Duplex) {
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onEnd);
    socket.on('error', this.onError);
    socket.resume();
  }

  /** Bytes received and not yet consumed. */
  get buffered(): number {
    return this.buffer.length;
  }

  /** Only the first byte, without consuming it (0x16 would be a TLS ClientHello). */
  async peekByte(): Promise<number> {
    await this.fill(1);
    return this.buffer[0]!;
  }

  /** A startup-phase packet: `code` is its first int32 (protocol version or a request code), `body` what follows. */
  async startup(): Promise<{ code: number; body: Buffer }> {
    await this.fill(4);
    const length = this.buffer.readInt32BE(0);
    if (length < 8 || length > MAX_STARTUP_PACKET) throw new ProtocolViolation('invalid length of startup packet');
    await this.fill(length);
    const code = this.buffer.readInt32BE(4);
    const body = Buffer.from(this.buffer.subarray(8, length));
    this.consume(length);
    return { code, body };
  }

  /** One typed message; a longer one than `maxLength` is a protocol violation (it is never buffered whole). */
  async message(maxLength: number): Promise<Message> {
    await this.fill(5);
    const type = String.fromCharCode(this.buffer[0]!);
    const length = this.buffer.readInt32BE(1);
    if (length < 4 || length > maxLength) throw new ProtocolViolation(`invalid message length ${length}`);
    await this.fill(length + 1);
    const body = Buffer.from(this.buffer.subarray(5, length + 1));
    this.consume(length + 1);
    return { type, body };
  }

  /** Stops reading: removes the listeners, pauses the socket and returns the unconsumed bytes. */
  detach(): Buffer {
    this.socket.off('data', this.onData);
    this.socket.off('end', this.onEnd);
    this.socket.off('close', this.onEnd);
    this.socket.off('error', this.onError);
    this.socket.pause();
    const rest = this.buffer;
    this.buffer = Buffer.alloc(0);
    return rest;
  }

  private consume(n: number): void {
    this.buffer = this.buffer.subarray(n);
    if (this.buffer.length <= HIGH_WATER) this.socket.resume();
  }

  private async fill(n: number): Promise<void> {
    while (this.buffer.length < n) {
      if (this.failure !== undefined) throw new PeerClosed(this.failure.message, { cause: this.failure });
      if (this.ended) throw new PeerClosed('connection closed');
      this.socket.resume();
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
