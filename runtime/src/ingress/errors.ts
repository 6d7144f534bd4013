import { RatchetError } from '../errors/errors.ts';

/**
 * An ingress request that cannot be served; rendered as `{code, message, source: "ingress"}` with
 * `x-restate-error-source: ingress`. Build one through `IngressErrors` so that every condition keeps restate's status
 * and wording (restate's `HandlerError`); only the error handler turns it into a response.
 */
export class IngressError extends RatchetError {
  readonly code = undefined;
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** restate-server 1.7's non-standard status for "output requested, invocation still running". */
export const NOT_READY_STATUS = 470;

export const IngressErrors = {
  notFound: () => new IngressError(404, 'not found'),
  invocationNotFound: () => new IngressError(404, 'invocation not found'),
  serviceNotFound: (service: string) =>
    new IngressError(404, `service '${service}' not found, make sure to register the service before calling it.`),
  handlerNotFound: (service: string, handler: string) =>
    new IngressError(
      404,
      `the service '${service}' exists, but the handler '${handler}' was not found, check that the handler exists in the latest registered service version.`,
    ),
  methodNotAllowed: () => new IngressError(405, 'method not allowed'),
  notReady: () => new IngressError(NOT_READY_STATUS, 'the invocation exists but has not completed yet'),

  badPath: (path: string) => new IngressError(400, `bad path: ${path}`),
  nulInTarget: (what: string) =>
    new IngressError(400, `invalid ${what} body: it contains U+0000 (NUL), which no service, key or id can hold`),
  nulInPath: () => new IngressError(400, 'bad path: it contains U+0000 (%00), which no service, key or id can hold'),
  badServicePath: () =>
    new IngressError(400, 'bad path, expected either /:service-name/:handler or /:object-name/:object-key/:handler'),
  badAwakeablesPath: () =>
    new IngressError(
      400,
      'bad path, expected either /restate/awakeables/:id/resolve or /restate/awakeables/:id/reject',
    ),
  badInvocationPath: () =>
    new IngressError(
      400,
      'bad path, expected either /restate/invocation/:invocation_id/output or /restate/invocation/:invocation_id/attach or /restate/invocation/:invocation_target/:idempotency_key/output or /restate/invocation/:invocation_target/:idempotency_key/attach',
    ),
  badWorkflowPath: () =>
    new IngressError(
      400,
      'bad path, expected either /restate/workflow/:workflow_name/:workflow_key/output or /restate/workflow/:workflow_name/:workflow_key/attach',
    ),
  badRestateApiPath: () =>
    new IngressError(
      400,
      'bad path, expected /restate/call/:service/:handler, /restate/send/:service/:handler, /restate/scope/:scope/call/:service/:handler, /restate/attach/:invocation_id, /restate/output/:invocation_id, or /restate/lookup',
    ),
  /** `detail` is Rust's Debug rendering of the `FromUtf8Error`, which restate prints verbatim. */
  keyNotUtf8: (detail: string) => new IngressError(400, `bad path, cannot decode key: ${detail}`),

  badInvocationId: (id: string, reason: string) => new IngressError(400, `bad invocation id '${id}': ${reason}`),
  badAwakeableId: (id: string, reason: string) => new IngressError(400, `bad awakeable id '${id}': ${reason}`),
  badScopeValue: (reason: string) => new IngressError(400, `bad scope value: ${reason}`),
  /** restate answers an unreadable attach/output/lookup body with 500 (and a backtrace, which we leave out). */
  unreadableBody: (detail: string) => new IngressError(500, `cannot read body: ${detail}`),

  privateService: () => new IngressError(400, 'the invoked service is not public'),
  /** RT0020: the service's deployment speaks only deprecated protocol versions (`message` says which). */
  deprecatedProtocol: (message: string) => new IngressError(400, `[RT0020] ${message}`),
  idempotencyKeyOnWorkflow: () =>
    new IngressError(
      400,
      'cannot use the idempotency key with workflow handlers. The handler invocation will already be idempotent by the workflow key itself.',
    ),
  scopeRequiresVQueues: () => new IngressError(400, 'scoped invocations require vqueues to be enabled'),
  limitKeyWithoutScope: () => new IngressError(400, 'limit-key requires a scope to be set'),
  badLimitKey: (reason: string) => new IngressError(400, `invalid limit-key: ${reason}`),
  /**
   * restate-server 1.7.12 words it so for virtual objects (scoped objects are a further experimental feature). It
   * accepts scoped workflows; Ratchet does not yet (a workflow's key lock lives on its key's partition).
   */
  scopeOnKeyedTarget: (ty: string) =>
    new IngressError(400, `scope is not supported for ${ty === 'VirtualObject' ? 'Virtual Object' : ty} targets`),
  badDelay: (detail: string) =>
    new IngressError(400, `bad delay query parameter, must be a ISO8601 duration: ${detail}`),
  delayOnCall: () =>
    new IngressError(400, 'cannot use the delay query parameter with calls. The delay is supported only with sends'),
} as const;
