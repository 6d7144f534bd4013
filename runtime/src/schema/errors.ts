import { RatchetError, type RatchetErrorOptions } from '../errors/errors.ts';

/*
 * Errors of deployment registration, discovery and schema lookups. Each class fixes its code and status; the status
 * follows what restate-server 1.7.12 answers for the same condition (discovery problems are 500 there, because the
 * fault is the endpoint's answer, not the request).
 */

/** META0003: the endpoint could not be reached for discovery, timed out, or answered with a non-2xx status. */
export class DiscoveryFailedError extends RatchetError {
  readonly code = 'META0003';
  readonly status = 500;
}

/**
 * META0004: the URI is already registered by a deployment that exposes something else. Deployments are immutable:
 * a changed endpoint needs a new URI, or `force: true`.
 */
export class DeploymentAlreadyRegisteredError extends RatchetError {
  readonly code = 'META0004';
  readonly status = 409;
}

/** META0006: a new revision of a service changes the service type of the registered revision. */
export class IncompatibleServiceRevisionError extends RatchetError {
  readonly code = 'META0006';
  readonly status = 409;

  constructor(serviceName: string, options: RatchetErrorOptions = {}) {
    super(
      `detected a new service revision for '${serviceName}' changing the service type from previous revision. ` +
        'Service type cannot be changed across revisions.',
      options,
    );
  }
}

/** META0012: the protocol versions the endpoint supports do not overlap Ratchet's. */
export class IncompatibleProtocolVersionsError extends RatchetError {
  readonly code = 'META0012';
  readonly status = 500;
}

/** META0013: the discovery response cannot be understood (content type, JSON, or manifest structure). */
export class BadDiscoveryResponseError extends RatchetError {
  readonly code = 'META0013';
  readonly status = 500;
}

/**
 * META0013 as well, for a manifest that decodes but describes services that cannot exist (a handler type that does
 * not fit its service type, a handler made public inside a private service, duplicate names). restate-server answers
 * these with 400.
 */
export class InvalidServiceDefinitionError extends RatchetError {
  readonly code = 'META0013';
  readonly status = 400;
}

/** META0014: discovery over HTTP/2 failed at the protocol level, typically because the endpoint only speaks HTTP/1.1. */
export class Http2DiscoveryFailedError extends RatchetError {
  readonly code = 'META0014';
  readonly status = 500;
}

/** META0015: the endpoint announces BIDI_STREAM although it was discovered over a request/response transport. */
export class BidiStreamOverRequestResponseError extends RatchetError {
  readonly code = 'META0015';
  readonly status = 500;
}

/** META0017: `force` cannot tell which deployment to replace because several share the URI. */
export class AmbiguousForcedRegistrationError extends RatchetError {
  readonly code = 'META0017';
  readonly status = 409;
}

/** A registration request field with a value that can never work (restate: "The request field 'x' is invalid"). */
export class InvalidRegistrationFieldError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;

  constructor(field: string, reason: string, options: RatchetErrorOptions = {}) {
    super(`The request field '${field}' is invalid. Reason: ${reason}`, options);
  }
}

/** Something restate-server can do that Ratchet does not implement (yet); never faked. */
export class NotSupportedError extends RatchetError {
  readonly code = undefined;
  readonly status = 501;
}

export class DeploymentNotFoundError extends RatchetError {
  readonly code = undefined;
  readonly status = 404;

  constructor(deploymentId: string) {
    super(`The requested deployment '${deploymentId}' does not exist`);
  }
}

export class ServiceNotFoundError extends RatchetError {
  readonly code = undefined;
  readonly status = 404;

  constructor(serviceName: string) {
    super(`The requested service '${serviceName}' does not exist`);
  }
}

export class HandlerNotFoundError extends RatchetError {
  readonly code = undefined;
  readonly status = 404;

  constructor(serviceName: string, handlerName: string) {
    super(`The requested handler '${handlerName}' on service '${serviceName}' does not exist`);
  }
}
