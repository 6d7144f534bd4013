import { RatchetError, RequestedNotFoundError } from '../errors/errors.ts';

/*
 * Refusals of the invocation-management operations (admin API), with restate-server 1.7.12's statuses and messages.
 * They carry no error code, like restate's (`restate_code: null`).
 */

abstract class ManagementError extends RatchetError {
  readonly code = undefined;
}

export class InvocationNotFoundError extends RequestedNotFoundError {
  constructor(id: string) {
    super(`invocation '${id}'`);
  }
}

export class InvocationAlreadyCompletedError extends ManagementError {
  readonly status = 409;
  constructor(id: string) {
    super(`The invocation '${id}' was already completed.`);
  }
}

export class InvocationNotCompletedError extends ManagementError {
  readonly status = 409;
  constructor(id: string) {
    super(`The invocation '${id}' is not yet completed.`);
  }
}

export class InvocationStillRunningError extends ManagementError {
  readonly status = 409;
  constructor(id: string) {
    super(`The invocation '${id}' is still running.`);
  }
}

export class InvocationNotRunningError extends ManagementError {
  readonly status = 409;
  constructor(id: string) {
    super(`The invocation '${id}' is not running, cannot be paused.`);
  }
}

export class InvocationCompletedCannotResumeError extends ManagementError {
  readonly status = 409;
  constructor(id: string) {
    super(`The invocation '${id}' is completed, cannot be resumed.`);
  }
}

export class DeploymentCannotChangeError extends ManagementError {
  readonly status = 409;
  constructor(id: string) {
    super(
      `The invocation '${id}' is still running or the deployment id is not pinned yet, deployment id cannot be changed.`,
    );
  }
}

export class InvocationNotStartedError extends ManagementError {
  readonly status = 425;
  constructor(id: string, what: 'resumed' | 'restarted') {
    super(
      what === 'resumed'
        ? `The invocation '${id}' is either inboxed or scheduled, cannot be resumed.`
        : `The invocation '${id}' cannot be restarted because it's not running yet.`,
    );
  }
}

export class RestartUnsupportedError extends ManagementError {
  readonly status = 422;
  constructor(id: string) {
    super(
      `Restarting the invocation '${id}' is not supported. Restarting workflows is not supported, and restarting invocations created using the old service protocol.`,
    );
  }
}

export class InputUnavailableError extends ManagementError {
  readonly status = 410;
  constructor(id: string) {
    super(
      `The invocation '${id}' cannot be restarted because the input is not available. This indicates that the journal was already purged, or not retained at all.`,
    );
  }
}

export class IncompatibleDeploymentError extends ManagementError {
  readonly status = 400;
  constructor(id: string, protocolVersion: number, deploymentId: string, min: number, max: number) {
    super(
      `The invocation '${id}' is running on protocol version '${protocolVersion}', while the chosen deployment '${deploymentId}' supports the range ${min}..=${max}.`,
    );
  }
}

export class DeploymentNotFoundError extends ManagementError {
  readonly status = 400;
  constructor(id: string, what: 'resume' | 'restart') {
    super(
      `The given deployment was not found when trying to ${what === 'resume' ? 'resume' : 'restart as new'} the invocation '${id}'.`,
    );
  }
}

/** A request parameter that cannot apply to this invocation (bad `from`, unknown deployment, …). */
export class BadManagementRequestError extends ManagementError {
  readonly status = 400;
}

/** The invocation's partition is not owned by this process (restate's routing error). */
export class PartitionUnavailableError extends ManagementError {
  readonly status = 503;
  constructor(id: string) {
    super(`The partition of invocation '${id}' is not served by this node right now; retry the request.`);
  }
}

/**
 * The partition is not served by this process at the moment the request reached the engine (another node owns it, it
 * is moving, or it is being recovered). Thrown before anything was written, so the edges may send the request to the
 * owner or try again; it reaches a client only when no owner could take it in time.
 */
export class PartitionNotServedError extends ManagementError {
  readonly status = 503;
  constructor(readonly partition: number) {
    super(
      `partition ${partition} is not served by this node right now (it is moving between nodes or being recovered); retry the request`,
    );
  }
}
