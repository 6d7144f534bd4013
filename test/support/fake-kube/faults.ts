import { KubeError, type StatusReason } from './errors.ts';

/** Failure injection: the next N matching requests fail, and every request may be delayed. */

/** What the fake knows about a request when it decides on faults (and what predicates see). */
export interface RequestDescription {
  readonly method: string;
  readonly path: string;
  /** get, list, watch, create, update, patch, delete, deletecollection; '' for discovery and other paths. */
  readonly verb: string;
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly subresource: string;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
}

export interface FailureRule {
  /** How many matching requests fail (default 1). */
  readonly count?: number;
  /** HTTP status (default 500); the Status reason follows from it. */
  readonly status?: number;
  readonly message?: string;
  readonly verb?: string | readonly string[];
  /** Plural resource name, e.g. `deployments`. */
  readonly resource?: string;
  readonly subresource?: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly match?: (request: RequestDescription) => boolean;
}

const reasons: Record<number, StatusReason> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Gone',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

export class Faults {
  private rules: { rule: FailureRule; remaining: number }[] = [];
  private latency: (request: RequestDescription) => number = () => 0;

  failNext(rule: FailureRule): void {
    this.rules.push({ rule, remaining: rule.count ?? 1 });
  }

  setLatency(latency: number | ((request: RequestDescription) => number)): void {
    this.latency = typeof latency === 'number' ? () => latency : latency;
  }

  delayFor(request: RequestDescription): number {
    return this.latency(request);
  }

  /** The injected failure for this request, if a rule matches (consuming one of its count). */
  take(request: RequestDescription): KubeError | undefined {
    const found = this.rules.find(({ rule, remaining }) => remaining > 0 && matches(rule, request));
    if (found === undefined) return undefined;
    found.remaining--;
    this.rules = this.rules.filter((r) => r.remaining > 0);
    const status = found.rule.status ?? 500;
    const reason = reasons[status] ?? 'InternalError';
    const message =
      found.rule.message ??
      (status === 409
        ? `Operation cannot be fulfilled on ${request.resource} "${request.name ?? ''}": the object has been modified; please apply your changes to the latest version and try again`
        : `fake-kube injected failure (${status})`);
    return new KubeError(
      reason,
      message,
      { ...(request.name !== undefined ? { name: request.name } : {}), kind: request.resource },
      status,
    );
  }

  clear(): void {
    this.rules = [];
    this.latency = () => 0;
  }
}

function matches(rule: FailureRule, request: RequestDescription): boolean {
  const verbs = rule.verb === undefined ? undefined : typeof rule.verb === 'string' ? [rule.verb] : rule.verb;
  if (verbs !== undefined && !verbs.includes(request.verb)) return false;
  if (rule.resource !== undefined && rule.resource !== request.resource) return false;
  if (rule.subresource !== undefined && rule.subresource !== request.subresource) return false;
  if (rule.namespace !== undefined && rule.namespace !== request.namespace) return false;
  if (rule.name !== undefined && rule.name !== request.name) return false;
  return rule.match === undefined || rule.match(request);
}
