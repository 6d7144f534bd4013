import http from 'node:http';
import http2 from 'node:http2';

/**
 * One HTTP exchange with a deployment carrying a protocol stream: the request body is written incrementally (bidi)
 * or all at once (request/response); the response body arrives as chunks.
 */
export interface ExchangeHandlers {
  onResponse(status: number, headers: Record<string, string | string[] | undefined>): void;
  onData(chunk: Buffer): void;
  onEnd(): void;
  onError(err: Error): void;
}

export interface Exchange {
  write(buf: Buffer): void;
  /** Half-close: ends the request body. */
  end(): void;
  /** Tears the exchange down; no handler fires afterwards. */
  abort(): void;
}

export interface ExchangeRequest {
  url: URL;
  headers: Record<string, string>;
}

/**
 * HTTP/2 cleartext with prior knowledge. Sessions are kept per origin and shared by all invocations, so an
 * invocation attempt costs one stream, not one connection.
 */
export class Http2Client {
  private readonly sessions = new Map<string, http2.ClientHttp2Session>();

  open(req: ExchangeRequest, handlers: ExchangeHandlers): Exchange {
    const session = this.session(req.url.origin);
    let done = false;
    const stream = session.request({
      ':method': 'POST',
      ':path': req.url.pathname + req.url.search,
      ...req.headers,
    });
    stream.on('response', (headers) => {
      if (done) return;
      const status = Number(headers[':status']);
      handlers.onResponse(status, headers);
    });
    stream.on('data', (chunk: Buffer) => {
      if (!done) handlers.onData(chunk);
    });
    stream.on('end', () => {
      if (done) return;
      done = true;
      handlers.onEnd();
    });
    stream.on('error', (err: Error) => {
      if (done) return;
      done = true;
      handlers.onError(err);
    });
    stream.on('close', () => {
      if (done) return;
      done = true;
      handlers.onError(new Error(`stream closed with code ${stream.rstCode ?? 'unknown'}`));
    });
    return {
      write: (buf) => {
        if (!stream.writableEnded && !stream.destroyed) stream.write(buf);
      },
      end: () => {
        if (!stream.writableEnded && !stream.destroyed) stream.end();
      },
      abort: () => {
        done = true;
        if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
      },
    };
  }

  private session(origin: string): http2.ClientHttp2Session {
    const existing = this.sessions.get(origin);
    if (existing !== undefined && !existing.closed && !existing.destroyed) return existing;
    const session = http2.connect(origin);
    const forget = (): void => {
      if (this.sessions.get(origin) === session) this.sessions.delete(origin);
    };
    session.on('error', forget);
    session.on('close', forget);
    session.on('goaway', forget);
    // An idle pooled session must not keep the process alive.
    session.unref();
    this.sessions.set(origin, session);
    return session;
  }

  close(): void {
    for (const s of this.sessions.values()) s.destroy();
    this.sessions.clear();
  }
}

/** HTTP/1.1 request/response with keep-alive connections. */
export class Http1Client {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

  open(req: ExchangeRequest, handlers: ExchangeHandlers): Exchange {
    let done = false;
    const chunks: Buffer[] = [];
    const request = http.request(req.url, { method: 'POST', agent: this.agent, headers: req.headers });
    request.on('response', (res) => {
      if (done) return;
      handlers.onResponse(res.statusCode ?? 0, res.headers);
      res.on('data', (chunk: Buffer) => {
        if (!done) handlers.onData(chunk);
      });
      res.on('end', () => {
        if (done) return;
        done = true;
        handlers.onEnd();
      });
      res.on('error', (err) => {
        if (done) return;
        done = true;
        handlers.onError(err);
      });
    });
    request.on('error', (err) => {
      if (done) return;
      done = true;
      handlers.onError(err);
    });
    return {
      // Request/response: the whole body is sent at once when the request ends.
      write: (buf) => {
        chunks.push(buf);
      },
      end: () => {
        if (request.writableEnded) return;
        const body = Buffer.concat(chunks);
        request.setHeader('content-length', body.length);
        request.end(body);
      },
      abort: () => {
        done = true;
        request.destroy();
      },
    };
  }

  close(): void {
    this.agent.destroy();
  }
}
