import { RatchetError, RequestedNotFoundError, type RatchetErrorOptions } from '../errors/errors.ts';

/*
 * Errors of deployment registration, manifests and schema lookups (discovery's own are in
 * `service-client/errors.ts`). Each class fixes its code and status; the status follows what restate-server 1.7.12
 * answers for the same condition.
 */

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

/**
 * META0013 as well, for a manifest that decodes but describes services that cannot exist (a handler type that does
 * not fit its service type, a handler made public inside a private service, duplicate names). restate-server answers
 * these with 400.
 */
export class InvalidServiceDefinitionError extends RatchetError {
  readonly code = 'META0013';
  readonly status = 400;
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

/** Something restate-server can do that Ratchet does not implement (yet); never faked. */
export class NotSupportedError extends RatchetError {
  readonly code = undefined;
  readonly status = 501;
}

export class DeploymentNotFoundError extends RequestedNotFoundError {
  constructor(deploymentId: string) {
    super(`deployment '${deploymentId}'`);
  }
}

export class ServiceNotFoundError extends RequestedNotFoundError {
  constructor(serviceName: string) {
    super(`service '${serviceName}'`);
  }
}

export class HandlerNotFoundError extends RequestedNotFoundError {
  constructor(serviceName: string, handlerName: string) {
    super(`handler '${handlerName}' on service '${serviceName}'`);
  }
}

/**
 * META0016: `PATCH /deployments/{id}` found an endpoint too different from the deployment it would replace in place
 * (protocol versions, services, service types or handlers). restate-server answers these with 400.
 */
export class IncompatibleDeploymentUpdateError extends RatchetError {
  readonly code = 'META0016';
  readonly status = 400;
}

/** META0009: a subscription that can never work (source, sink, cluster, sink handler type). */
export class InvalidSubscriptionError extends RatchetError {
  readonly code = 'META0009';
  readonly status = 400;
}

/**
 * A change addressed something the registry does not hold. restate-server words these "not found in the schema
 * registry: …" (unlike the lookups, "The requested … does not exist"); Ratchet keeps both phrasings.
 */
export class SchemaNotFoundError extends RatchetError {
  readonly code = undefined;
  readonly status = 404;

  constructor(what: string) {
    super(`not found in the schema registry: ${what}`);
  }
}

export class SubscriptionNotFoundError extends RequestedNotFoundError {
  constructor(id: string) {
    super(`subscription '${id}'`);
  }
}

export class KafkaClusterNotFoundError extends RequestedNotFoundError {
  constructor(name: string) {
    super(`Kafka cluster '${name}'`);
  }
}

/** 409: a Kafka cluster with this name is registered already, or defined in the configuration file. */
export class KafkaClusterConflictError extends RatchetError {
  readonly code = undefined;
  readonly status = 409;
}

/** 400: Kafka cluster properties without a way to reach the brokers. */
export class InvalidKafkaClusterError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;
}

/** 400: `workflow_completion_retention` for a service that is not a workflow. */
export class RetentionNotModifiableError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;

  constructor(serviceType: string) {
    super(`modifying retention time for service type ${serviceType} is unsupported`);
  }
}

/** 405: `PUT /deployments/{id}` outside admin API v2, where restate-server deprecated it in favour of PATCH. */
export class DeprecatedPutDeploymentError extends RatchetError {
  readonly code = undefined;
  readonly status = 405;

  constructor() {
    super('PUT deployment is deprecated, use PATCH instead');
  }
}

/**
 * 400: Lambda options (`arn`, `assume_role_arn`) in an update of an HTTP deployment, or HTTP options (`uri`,
 * `use_http_11`) in an update of a Lambda deployment (restate's message).
 */
export class DeploymentTypeMismatchError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;

  constructor(deployment: 'http' | 'lambda', options: 'http' | 'lambda') {
    super(
      `cannot update the deployment, as the deployment type is ${deployment} while the update options are for type ${options}`,
    );
  }
}

/**
 * META0005: the stored metadata (deployments, service revisions) cannot be read back: a row is damaged or was edited
 * by hand. At startup it stops the node; during a schema change it fails the change, which is not propagated.
 */
export class MetadataUnreadableError extends RatchetError {
  readonly code = 'META0005';
  readonly status = 500;
}
