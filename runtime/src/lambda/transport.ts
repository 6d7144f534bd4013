import type { ErrorCode } from '../errors/codes.ts';
import { InvokerError } from '../invoker/invoker-error.ts';
import type { Exchange, ExchangeHandlers } from '../service-client/transport.ts';
import type { FunctionArn } from './arn.ts';
import { LambdaInvokeError, type LambdaFailureKind, type LambdaFunctions } from './functions.ts';

/**
 * An invocation attempt over Lambda: the request/response protocol in one synchronous invoke. The attempt writes the
 * Start message and the journal, ends the request, and the whole body goes out as restate's invocation event; the
 * function's answer comes back as the response of an HTTP exchange (status, headers, body), so the attempt reads it
 * as it reads an HTTP/1.1 deployment's. A suspension ends the invoke; a later completion re-invokes with the journal.
 *
 * What Lambda itself says becomes the attempt's failure, with the code the invocation records:
 * payload over 6 MB → RT0019; throttled → RT0023 (retried with the policy's backoff); the function failed, AWS
 * refused the call or the role could not be assumed → RT0006 with AWS's message; Lambda unreachable → RT0010; an
 * answer that is not the SDK's → RT0012. All are retried under the handler's retry policy.
 */

const CODES: Record<LambdaFailureKind, ErrorCode> = {
  'too-large': 'RT0019',
  throttled: 'RT0023',
  'function-error': 'RT0006',
  credentials: 'RT0006',
  refused: 'RT0006',
  unavailable: 'RT0010',
  malformed: 'RT0012',
};

const TOO_LARGE_HINT =
  ': keep the journal small (large ctx.run results and state travel with every attempt), enable lazy state for the ' +
  'service, or host it where it can stream (HTTP/2)';

export interface LambdaExchangeRequest {
  fn: FunctionArn;
  assumeRoleArn: string | undefined;
  /** `/invoke/<service>/<handler>`. */
  path: string;
  headers: Record<string, string>;
}

export function openLambdaExchange(
  functions: LambdaFunctions,
  req: LambdaExchangeRequest,
  handlers: ExchangeHandlers,
): Exchange {
  const chunks: Buffer[] = [];
  const abort = new AbortController();
  let ended = false;
  let done = false;
  return {
    write: (buf) => {
      if (!ended) chunks.push(buf);
    },
    end: () => {
      if (ended) return;
      ended = true;
      functions
        .invoke(
          req.fn,
          req.assumeRoleArn,
          { path: req.path, method: 'POST', headers: req.headers, body: Buffer.concat(chunks) },
          abort.signal,
        )
        .then(
          (answer) => {
            if (done) return;
            done = true;
            handlers.onResponse(answer.statusCode, answer.headers);
            if (answer.body.length > 0) handlers.onData(answer.body);
            handlers.onEnd();
          },
          (err: unknown) => {
            if (done) return;
            done = true;
            if (err instanceof LambdaInvokeError) {
              const code = CODES[err.kind];
              handlers.onError(new InvokerError(code, code === 'RT0019' ? err.message + TOO_LARGE_HINT : err.message));
            } else {
              handlers.onError(err instanceof Error ? err : new Error(String(err)));
            }
          },
        );
    },
    abort: () => {
      done = true;
      abort.abort();
    },
  };
}
