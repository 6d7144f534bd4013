import { RatchetError } from '../errors/errors.ts';

/*
 * Errors of deployment discovery (`GET {uri}/discover`). The status follows what restate-server 1.7.12 answers for
 * the same condition: discovery problems are 500 there, because the fault is the endpoint's answer, not the request.
 */

/** META0003: the endpoint could not be reached for discovery, timed out, or answered with a non-2xx status. */
export class DiscoveryFailedError extends RatchetError {
  readonly code = 'META0003';
  readonly status = 500;
}

/** META0013: the discovery response cannot be understood (content type, JSON, or manifest structure). */
export class BadDiscoveryResponseError extends RatchetError {
  readonly code = 'META0013';
  readonly status = 500;
}

/** META0014: discovery over HTTP/2 failed at the protocol level, typically because the endpoint only speaks HTTP/1.1. */
export class Http2DiscoveryFailedError extends RatchetError {
  readonly code = 'META0014';
  readonly status = 500;
}
