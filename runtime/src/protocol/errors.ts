/**
 * Errors raised by the service-protocol codec. They are plain `Error`s on purpose: the codec knows nothing about
 * Ratchet's error-code registry, the invoker maps them (a protocol violation fails the attempt, a too-large message
 * is RT0003).
 */

/** The peer sent bytes that are not a valid service-protocol stream or message. */
export class ProtocolViolationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ProtocolViolationError';
  }
}

/** A frame header declared a payload longer than the configured limit; nothing of the payload has been buffered. */
export class MessageTooLargeError extends Error {
  readonly messageType: number;
  readonly declaredSize: number;
  readonly maxSize: number;

  constructor(messageType: number, declaredSize: number, maxSize: number) {
    super(
      `message of type 0x${messageType.toString(16).padStart(4, '0')} declares ${declaredSize} bytes, ` +
        `more than the limit of ${maxSize} bytes`,
    );
    this.name = 'MessageTooLargeError';
    this.messageType = messageType;
    this.declaredSize = declaredSize;
    this.maxSize = maxSize;
  }
}
