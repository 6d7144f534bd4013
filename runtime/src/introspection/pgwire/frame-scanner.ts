/**
 * Follows message boundaries in a relayed byte stream without buffering bodies: reports each message's type as its
 * header passes, and whether the stream currently sits between two messages (where the listener may inject one of
 * its own, e.g. a FATAL on shutdown, without corrupting the stream).
 */
export class FrameScanner {
  private readonly header = Buffer.alloc(5);
  private headerFill = 0;
  private skip = 0;
  private lost = false;

  constructor(private readonly onMessage: (type: number) => void) {}

  /** True between messages; false inside one, or once the framing was broken (a length below 4). */
  get atBoundary(): boolean {
    return !this.lost && this.headerFill === 0 && this.skip === 0;
  }

  push(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length && !this.lost) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - i);
        this.skip -= n;
        i += n;
        continue;
      }
      const n = Math.min(5 - this.headerFill, chunk.length - i);
      chunk.copy(this.header, this.headerFill, i, i + n);
      this.headerFill += n;
      i += n;
      if (this.headerFill < 5) break;
      this.headerFill = 0;
      const length = this.header.readInt32BE(1);
      // The receiving side rejects such a message and ends the session; the scanner just stops following.
      if (length < 4) {
        this.lost = true;
        break;
      }
      this.skip = length - 4;
      this.onMessage(this.header[0]!);
    }
  }
}
