import { expect } from 'vitest';
import {
  boxService,
  flow,
  gates,
  locker,
  parentService,
  posted,
  type DiscoveryOnlyDeployment,
  type Posted,
  RESTATE_INVOCATION_MESSAGES,
} from '../integration/admin/invocations-support.ts';
import { waitFor } from '../support/wait.ts';
import {
  describeExchange,
  selectedTargets,
  useTargets,
  startRatchetTargetServing,
  startRestateTargetServing,
  type Exchange,
  type HttpRequest,
  type ServiceSet,
  type TargetName,
  RecordedRun,
  dumpRun,
  playRuns,
} from './targets.ts';

/*
 * What the invocation-management compatibility tests (invocations-*.compat.test.ts) share: the expected differences,
 * the services and targets, a scenario run per target, the comparison of their answers, and the expected answers.
 */

// --------------------------------------------------------------------------------------------------------------------
// Expected differences

/**
 * Where Ratchet deliberately answers differently. Each entry says what is compared instead at the steps that name
 * it (the status is always compared unless the entry says otherwise).
 */
export const DIFFERENCES = {
  /**
   * Ratchet's admin error bodies carry `service_code` next to `restate_code` (the specification names the field
   * `service_code`; restate clients read `restate_code`). Applied to every step: the field is checked to equal
   * `restate_code` and then dropped.
   */
  serviceCode: 'service_code',
  /**
   * `from` whose journal prefix holds a command without completion, or that lies past the journal's end: restate says
   * "The prefix of the journal '<id>' up to 'from' (included) contains some Commands without respective
   * Completions." in both cases; Ratchet names the missing completions, or the journal length. Compared: status,
   * content-type, that the message names the invocation, `restate_code`.
   */
  fromPrefixMessage: 'from-prefix message',
  /**
   * `deployment` without `from`: restate-server ignores it (200); Ratchet refuses it (400), as the specification says
   * the parameter is "usable only together with from" (shared/spec/000_…txt §4.1). Nothing compared.
   */
  deploymentWithoutFrom: 'deployment without from',
  /**
   * `deployment={"Id":"dp_…"}` (the object form as URL-encoded JSON): restate-server reads the query with serde_qs
   * and refuses it (400 "unrecognized resource type"); Ratchet accepts it too (the specification leaves the encoding
   * open). Nothing compared.
   */
  objectFormAsJson: 'object form as JSON',
  /**
   * Pausing an invocation that is inside a ctx.run: both accept (202), but restate-server pauses it only once the
   * run's result is in, while Ratchet aborts the attempt at once. A second pause before the run ends is 202 on
   * restate-server and 200 ("already paused") on Ratchet. Nothing compared at that step.
   */
  pauseInsideRun: 'pause inside a ctx.run',
} as const;

export type Difference = (typeof DIFFERENCES)[keyof typeof DIFFERENCES];

// --------------------------------------------------------------------------------------------------------------------
// Services and targets

export const SERVICES: ServiceSet = [boxService('Box', 'A'), parentService('Box'), locker, flow];

/** The compat targets of this run (`RATCHET_COMPAT_TARGETS`). */
export const names = selectedTargets();
/** Discovery-only deployments a scenario started; closed with the targets. */
export const decoys: DiscoveryOnlyDeployment[] = [];

// --------------------------------------------------------------------------------------------------------------------
// Scenario runs

export const REQUEST_TIMEOUT_MS = 20_000;
export const SCENARIO_TIMEOUT_MS = 120_000;
export const INVOCATION_ID_IN_TEXT = /inv_1[0-9A-Za-z]{33}/g;
export const DEPLOYMENT_ID_IN_TEXT = /dp_1[0-9A-Za-z]{22}/g;
export const JSON_CT = { 'content-type': 'application/json' };
/** Well-formed, never created (from the transcripts). */
export const UNKNOWN_ID = 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz';
/** Well-formed, never registered. */
export const UNKNOWN_DEPLOYMENT = 'dp_14LsPzKBnJNR2ofNbUKyKXl';

/** One target's run of a scenario: each step's exchange (a poll keeps its last), and the names of its invocations. */
export class Run extends RecordedRun {
  readonly labels = new Map<string, string>();

  /** `<tag>-<name>`: keys and inputs that no other target and no other scenario uses. */
  key(name: string): string {
    return `${this.tag}-${name}`;
  }

  /** From now on `id` appears as `<name>` in this run's normalized answers. */
  label(id: string, name: string): string {
    this.labels.set(id, `<${name}>`);
    return id;
  }

  ingress(step: string, request: HttpRequest): Promise<Exchange> {
    return this.exchange(step, this.target.ingressUrl, request);
  }

  admin(step: string, path: string, method = 'PATCH'): Promise<Exchange> {
    return this.exchange(step, this.target.adminUrl, { method, path });
  }

  /** Repeats `send` until `done` holds for the answer (bounded by the suite's wait timeout). */
  until(step: string, send: () => Promise<Exchange>, done: (x: Exchange) => boolean): Promise<Exchange> {
    return waitFor(async () => {
      const x = await send();
      if (!done(x)) throw new Error(`'${step}' not there yet\n${describeExchange(x)}`);
      return x;
    });
  }

  /** Polls the ingress output of `id` until it is final (not 470). */
  output(step: string, id: string): Promise<Exchange> {
    return this.until(
      step,
      () => this.ingress(step, { method: 'GET', path: `/restate/invocation/${id}/output` }),
      (x) => x.response.status !== 470,
    );
  }

  /** Polls `PATCH pause` until the answer is 200 (already paused): the pause took effect. */
  paused(step: string, id: string): Promise<Exchange> {
    return this.until(
      step,
      () => this.admin(step, `/invocations/${id}/pause`),
      (x) => x.response.status === 200,
    );
  }

  /** `POST <path>/send[query]`; the id of the 202, labelled `name`. */
  async send(step: string, path: string, body: unknown, name: string, query = ''): Promise<string> {
    const x = await this.ingress(step, {
      method: 'POST',
      path: `${path}/send${query}`,
      headers: JSON_CT,
      body: JSON.stringify(body),
    });
    const id = (JSON.parse(x.response.text) as { invocationId?: unknown }).invocationId;
    if (x.response.status !== 202 || typeof id !== 'string') throw new Error(`no id\n${describeExchange(x)}`);
    return this.label(id, name);
  }

  /** A call that completes; the id of its answer, labelled `name`. */
  async call(step: string, path: string, body: unknown, name: string, headers: Record<string, string> = {}) {
    const x = await this.ingress(step, {
      method: 'POST',
      path,
      headers: { ...JSON_CT, ...headers },
      body: JSON.stringify(body),
    });
    const id = x.response.headers['x-restate-id'];
    if (x.response.status !== 200 || typeof id !== 'string') throw new Error(`call failed\n${describeExchange(x)}`);
    return this.label(id, name);
  }

  /** A `wait` handler that posted its awakeable; its id labelled `name`. */
  async waiting(step: string, name: string): Promise<Posted> {
    const key = this.key(name);
    await this.send(step, '/Box/wait', key, name);
    const p = await waitFor(() => posted.get(key) ?? Promise.reject(new Error(`${key} has not posted yet`)));
    this.label(p.invocationId, name);
    return p;
  }

  /** A `hold` handler inside its ctx.run, waiting at gate `<tag>-<name>`. */
  async holding(step: string, path: string, name: string): Promise<string> {
    const id = await this.send(step, path, this.key(name), name);
    await waitFor(() => expect(gates.reached(this.key(name))).toBe(true));
    return id;
  }

  async resolve(step: string, awakeableId: string, value: unknown): Promise<Exchange> {
    return this.ingress(step, {
      method: 'POST',
      path: `/restate/awakeables/${awakeableId}/resolve`,
      headers: JSON_CT,
      body: JSON.stringify(value),
    });
  }

  /** The id of the deployment serving `Box` on this target. */
  async boxDeployment(): Promise<string> {
    const x = await this.admin('list deployments', '/deployments', 'GET');
    const list = (JSON.parse(x.response.text) as { deployments: { id: string; services: { name: string }[] }[] })
      .deployments;
    const dp = list.find((d) => d.services.some((s) => s.name === 'Box'));
    if (dp === undefined) throw new Error(`no deployment serves Box\n${describeExchange(x)}`);
    return dp.id;
  }
}

export type Runs = Map<TargetName, Run>;

export type Play = (script: (run: Run) => Promise<void>) => Promise<Runs>;

/**
 * Starts the targets, each with its own SDK endpoint serving SERVICES, for the calling test file (stopped after it,
 * with the decoys), and returns `play`: it plays `script` on every target at once; restate-server must get through
 * it. Call once, at the top level of the test file.
 */
export function useScenarioTargets(): Play {
  const targets = useTargets(
    (n) => (n === 'restate' ? startRestateTargetServing(SERVICES) : startRatchetTargetServing(SERVICES)),
    {
      // Handlers still waiting at a gate would keep their SDK streams open.
      beforeStop: () => gates.openAll(),
      alsoClose: () => decoys.map((d) => d.close()),
    },
  );
  return (script) =>
    playRuns(
      [...targets.values()].map((t) => new Run(t, REQUEST_TIMEOUT_MS)),
      script,
    );
}

// --------------------------------------------------------------------------------------------------------------------
// Comparison

export interface Observed {
  status: number;
  'content-type': string | null;
  allow: string | null;
  body: unknown;
}

export function normalizeText(text: string, run: Run): string {
  return text
    .replace(INVOCATION_ID_IN_TEXT, (id) => run.labels.get(id) ?? '<invocation-id>')
    .replace(DEPLOYMENT_ID_IN_TEXT, '<deployment-id>')
    .split(run.tag)
    .join('<tag>');
}

export function observe(x: Exchange, run: Run): Observed {
  const text = normalizeText(x.response.text, run);
  let body: unknown = text;
  try {
    body = text === '' ? '' : JSON.parse(text);
  } catch {
    // Not JSON: compared as text.
  }
  const header = (name: string): string | null => {
    const v = x.response.headers[name];
    return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
  };
  return { status: x.response.status, 'content-type': header('content-type'), allow: header('allow'), body };
}

/** Drops Ratchet's `service_code` once it is seen to equal `restate_code` (DIFFERENCES.serviceCode). */
export function withoutServiceCode(o: Observed): Observed {
  const body = o.body;
  if (typeof body !== 'object' || body === null || !('service_code' in body)) return o;
  const { service_code: serviceCode, ...rest } = body as Record<string, unknown>;
  expect.soft(serviceCode, 'service_code equals restate_code').toEqual(rest['restate_code']);
  return { ...o, body: rest };
}

/** What DIFFERENCES.fromPrefixMessage leaves to compare. */
export function prefixShape(o: Observed, invocation: string): unknown {
  const body = o.body as { message?: unknown; restate_code?: unknown };
  return {
    status: o.status,
    'content-type': o['content-type'],
    namesTheInvocation: typeof body.message === 'string' && body.message.includes(invocation),
    restate_code: body.restate_code,
  };
}

export function stopped(run: Run, step: string): string {
  return `Ratchet did not reach '${step}': ${run.error?.message ?? 'the script skipped it'}`;
}

export interface StepOptions {
  /** A listed difference that applies at this step. */
  readonly difference?: Difference;
  /** For DIFFERENCES.fromPrefixMessage: the label of the invocation the message must name. */
  readonly invocation?: string;
}

/**
 * restate-server's answer at `step` must be `expected`; Ratchet's must equal restate-server's (or `expected` when only
 * Ratchet runs), except for what a listed difference excludes.
 */
export function expectStep(runs: Runs, step: string, expected: Observed, options: StepOptions = {}): void {
  const ref = runs.get('restate');
  let refObserved: Observed | undefined;
  if (ref !== undefined) {
    const x = ref.steps.get(step);
    expect(x, `restate-server run has no step '${step}'\n${dumpRun(ref)}`).toBeDefined();
    refObserved = observe(x!, ref);
    expect(refObserved, `restate-server vs expectation at '${step}'\n${describeExchange(x!)}\n`).toEqual(expected);
  }
  const ratchet = runs.get('ratchet');
  if (ratchet === undefined) return;
  const x = ratchet.steps.get(step);
  if (x === undefined) {
    expect.soft(stopped(ratchet, step)).toBe(`Ratchet reached '${step}'`);
    return;
  }
  const want = refObserved ?? expected;
  const got = withoutServiceCode(observe(x, ratchet));
  const context = `Ratchet vs restate-server at '${step}'\n${describeExchange(x)}\n\n${
    ref?.steps.get(step) === undefined ? '' : describeExchange(ref.steps.get(step)!)
  }\n`;
  switch (options.difference) {
    case undefined:
    case DIFFERENCES.serviceCode:
      expect.soft(got, context).toEqual(want);
      return;
    case DIFFERENCES.fromPrefixMessage:
      expect.soft(prefixShape(got, options.invocation!), context).toEqual(prefixShape(want, options.invocation!));
      return;
    case DIFFERENCES.deploymentWithoutFrom:
    case DIFFERENCES.objectFormAsJson:
    case DIFFERENCES.pauseInsideRun:
      return;
  }
}

/** Steps whose answers differ only by the listed difference: restate-server's is still checked. */
export function expectRestate(runs: Runs, step: string, expected: Observed, difference: Difference): void {
  expectStep(runs, step, expected, { difference });
}

export const EMPTY = (status: number): Observed => ({ status, 'content-type': null, allow: null, body: '' });

export function refusal(status: number, message: string): Observed {
  return { status, 'content-type': 'application/json', allow: null, body: { message, restate_code: null } };
}

export function queryText(text: string): Observed {
  return { status: 400, 'content-type': 'text/plain; charset=utf-8', allow: null, body: text };
}

export function ingressOk(body: unknown): Observed {
  return { status: 200, 'content-type': 'application/json', allow: null, body };
}

export function invocationFailure(code: number, message: string): Observed {
  return {
    status: code,
    'content-type': 'application/json',
    allow: null,
    body: { code, message, source: 'invocation' },
  };
}

export const OUTPUT_GONE: Observed = {
  status: 404,
  'content-type': 'application/json',
  allow: null,
  body: { code: 404, message: 'invocation not found', source: 'ingress' },
};

export const NOT_COMPLETED: Observed = {
  status: 470,
  'content-type': 'application/json',
  allow: null,
  body: { code: 470, message: 'the invocation exists but has not completed yet', source: 'ingress' },
};

/** `label`: the name the scenario gave the new invocation, if any. */
export function restarted(label = '<invocation-id>'): Observed {
  return {
    status: 200,
    'content-type': 'application/json',
    allow: null,
    body: { new_invocation_id: label },
  };
}

export const msg = RESTATE_INVOCATION_MESSAGES;

/**
 * restate-server pins protocol 6 (without its experimental V7 flag) and Ratchet 7: the decoy deployment (5..=5)
 * supports neither, and the version in the message is normalized by the scenario.
 */
export function incompatible(id: string): string {
  return `The invocation '${id}' is running on protocol version '<v>', while the chosen deployment '<deployment-id>' supports the range 5..=5.`;
}
