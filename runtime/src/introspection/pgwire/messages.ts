/*
 * The few PostgreSQL protocol v3 messages the listener reads or writes itself (startup, authentication, errors,
 * cancellation). Everything after authentication is relayed as bytes; see `relay.ts`.
 *
 * Framing: a startup-phase packet is `int32 length` (including itself) + `int32 code` + body; every other message is
 * `byte type` + `int32 length` (including itself, not the type) + body.
 */

/** Protocol 3.0; the listener speaks nothing newer (clients asking for 3.x get NegotiateProtocolVersion). */
export const PROTOCOL_3_0 = 196608;
export const SSL_REQUEST_CODE = 80877103;
export const GSSENC_REQUEST_CODE = 80877104;
export const CANCEL_REQUEST_CODE = 80877102;

/** PostgreSQL's own limit for a startup packet (MAX_STARTUP_PACKET_LENGTH). */
export const MAX_STARTUP_PACKET = 10_000;

/** Largest message accepted before a session is authenticated (password and SASL messages are tiny). */
export const MAX_AUTH_MESSAGE = 10_000;

export const AUTH_OK = 0;
export const AUTH_CLEARTEXT = 3;
export const AUTH_MD5 = 5;
export const AUTH_SASL = 10;
export const AUTH_SASL_CONTINUE = 11;
export const AUTH_SASL_FINAL = 12;

/** Message type bytes, as characters. */
export const MSG = {
  authentication: 'R',
  backendKeyData: 'K',
  errorResponse: 'E',
  noticeResponse: 'N',
  parameterStatus: 'S',
  readyForQuery: 'Z',
  negotiateProtocolVersion: 'v',
  /** Frontend: PasswordMessage, SASLInitialResponse and SASLResponse all use 'p'. */
  password: 'p',
  query: 'Q',
  parse: 'P',
  bind: 'B',
  describe: 'D',
  execute: 'E',
  close: 'C',
  sync: 'S',
  flush: 'H',
  functionCall: 'F',
  terminate: 'X',
} as const;

export const TYPE = {
  readyForQuery: MSG.readyForQuery.charCodeAt(0),
  query: MSG.query.charCodeAt(0),
  parse: MSG.parse.charCodeAt(0),
  bind: MSG.bind.charCodeAt(0),
  describe: MSG.describe.charCodeAt(0),
  execute: MSG.execute.charCodeAt(0),
  close: MSG.close.charCodeAt(0),
  sync: MSG.sync.charCodeAt(0),
  flush: MSG.flush.charCodeAt(0),
  functionCall: MSG.functionCall.charCodeAt(0),
  terminate: MSG.terminate.charCodeAt(0),
} as const;

/** The fields of an ErrorResponse the listener writes itself (PostgreSQL error fields S, V, C, M, D, H). */
export interface ErrorFields {
  readonly severity: 'ERROR' | 'FATAL';
  /** SQLSTATE, five characters. */
  readonly code: string;
  readonly message: string;
  readonly detail?: string;
  readonly hint?: string;
}

/** A typed message as read: type byte and body (without the header). */
export interface Message {
  readonly type: string;
  readonly body: Buffer;
}

/** Builds a message body field by field. */
export class Writer {
  private readonly parts: Buffer[] = [];

  int32(value: number): this {
    const b = Buffer.alloc(4);
    b.writeInt32BE(value);
    this.parts.push(b);
    return this;
  }

  cstring(value: string): this {
    this.parts.push(Buffer.from(value, 'utf8'), Buffer.from([0]));
    return this;
  }

  bytes(value: Buffer): this {
    this.parts.push(value);
    return this;
  }

  byte(value: number): this {
    this.parts.push(Buffer.from([value]));
    return this;
  }

  /** `type` + length + body. */
  message(type: string): Buffer {
    const body = Buffer.concat(this.parts);
    const header = Buffer.alloc(5);
    header.write(type, 0, 'latin1');
    header.writeInt32BE(body.length + 4, 1);
    return Buffer.concat([header, body]);
  }

  /** Length + body, for startup-phase packets (the code is the first int32 of the body). */
  packet(): Buffer {
    const body = Buffer.concat(this.parts);
    const header = Buffer.alloc(4);
    header.writeInt32BE(body.length + 4);
    return Buffer.concat([header, body]);
  }
}

/** Reads a body field by field; throws `ProtocolViolation` on a short or malformed body. */
export class Reader {
  private offset = 0;

  constructor(private readonly body: Buffer) {}

  int32(): number {
    if (this.offset + 4 > this.body.length) throw new ProtocolViolation('message too short');
    const value = this.body.readInt32BE(this.offset);
    this.offset += 4;
    return value;
  }

  cstring(): string {
    const end = this.body.indexOf(0, this.offset);
    if (end < 0) throw new ProtocolViolation('unterminated string in message');
    const value = this.body.toString('utf8', this.offset, end);
    this.offset = end + 1;
    return value;
  }

  bytes(length: number): Buffer {
    if (length < 0 || this.offset + length > this.body.length) throw new ProtocolViolation('message too short');
    const value = this.body.subarray(this.offset, this.offset + length);
    this.offset += length;
    return value;
  }

  rest(): Buffer {
    const value = this.body.subarray(this.offset);
    this.offset = this.body.length;
    return value;
  }

  get remaining(): number {
    return this.body.length - this.offset;
  }
}

/** A peer broke the protocol (SQLSTATE 08P01); the session ends. */
export class ProtocolViolation extends Error {
  override readonly name = 'ProtocolViolation';
}

// ---- backend → client, written by the listener ----

export function errorResponse(fields: ErrorFields): Buffer {
  const w = new Writer()
    .byte('S'.charCodeAt(0))
    .cstring(fields.severity)
    .byte('V'.charCodeAt(0))
    .cstring(fields.severity)
    .byte('C'.charCodeAt(0))
    .cstring(fields.code)
    .byte('M'.charCodeAt(0))
    .cstring(fields.message);
  if (fields.detail !== undefined) w.byte('D'.charCodeAt(0)).cstring(fields.detail);
  if (fields.hint !== undefined) w.byte('H'.charCodeAt(0)).cstring(fields.hint);
  return w.byte(0).message(MSG.errorResponse);
}

export function authenticationOk(): Buffer {
  return new Writer().int32(AUTH_OK).message(MSG.authentication);
}

export function authenticationCleartextPassword(): Buffer {
  return new Writer().int32(AUTH_CLEARTEXT).message(MSG.authentication);
}

export function authenticationSasl(mechanisms: readonly string[]): Buffer {
  const w = new Writer().int32(AUTH_SASL);
  for (const m of mechanisms) w.cstring(m);
  return w.byte(0).message(MSG.authentication);
}

export function authenticationSaslContinue(data: string): Buffer {
  return new Writer().int32(AUTH_SASL_CONTINUE).bytes(Buffer.from(data, 'utf8')).message(MSG.authentication);
}

export function authenticationSaslFinal(data: string): Buffer {
  return new Writer().int32(AUTH_SASL_FINAL).bytes(Buffer.from(data, 'utf8')).message(MSG.authentication);
}

export function backendKeyData(processId: number, secretKey: number): Buffer {
  return new Writer().int32(processId).int32(secretKey).message(MSG.backendKeyData);
}

export function negotiateProtocolVersion(newestMinor: number, unsupportedOptions: readonly string[]): Buffer {
  const w = new Writer().int32(newestMinor).int32(unsupportedOptions.length);
  for (const o of unsupportedOptions) w.cstring(o);
  return w.message(MSG.negotiateProtocolVersion);
}

// ---- client → backend, written by the listener ----

export function startupMessage(params: ReadonlyMap<string, string>): Buffer {
  const w = new Writer().int32(PROTOCOL_3_0);
  for (const [k, v] of params) w.cstring(k).cstring(v);
  return w.byte(0).packet();
}

export function sslRequest(): Buffer {
  return new Writer().int32(SSL_REQUEST_CODE).packet();
}

export function cancelRequest(processId: number, secretKey: number): Buffer {
  return new Writer().int32(CANCEL_REQUEST_CODE).int32(processId).int32(secretKey).packet();
}

export function passwordMessage(password: string): Buffer {
  return new Writer().cstring(password).message(MSG.password);
}

export function saslInitialResponse(mechanism: string, data: string): Buffer {
  const bytes = Buffer.from(data, 'utf8');
  return new Writer().cstring(mechanism).int32(bytes.length).bytes(bytes).message(MSG.password);
}

export function saslResponse(data: string): Buffer {
  return new Writer().bytes(Buffer.from(data, 'utf8')).message(MSG.password);
}

export function terminate(): Buffer {
  return new Writer().message(MSG.terminate);
}

/** The fields of an ErrorResponse or NoticeResponse body, by field code. */
export function parseErrorFields(body: Buffer): Map<string, string> {
  const fields = new Map<string, string>();
  const r = new Reader(body);
  while (r.remaining > 0) {
    const code = r.bytes(1)[0]!;
    if (code === 0) break;
    fields.set(String.fromCharCode(code), r.cstring());
  }
  return fields;
}
