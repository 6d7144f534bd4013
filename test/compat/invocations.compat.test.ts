import { describe, expect, it } from 'vitest';
import {
  boxService,
  flow,
  gates,
  locker,
  napping,
  parentService,
  posted,
  startDiscoveryOnlyDeployment,
  type DiscoveryOnlyDeployment,
  type Posted,
  RESTATE_INVOCATION_MESSAGES,
} from '../integration/admin/invocations-support.ts';
import { waitFor } from '../support/wait.ts';
import {
  describeExchange,
  httpRequest,
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

/**
 * Invocation-management compatibility: the same request sequences (cancel, kill, pause, resume, purge, purge-journal,
 * restart-as-new, the deprecated DELETE) played against restate-server 1.7.12 and Ratchet, each with its own SDK
 * endpoint (HTTP/2) serving the services of test/integration/admin/invocations-support.ts. restate-server's answers
 * are checked against what the transcripts say (or, where they say nothing, what restate-server answered when this
 * suite was written); Ratchet's must equal restate-server's after normalization, except for the differences listed
 * in DIFFERENCES, each applied only at the steps that name it. Ratchet mismatches are soft: a scenario reports every
 * step where Ratchet differs. `RATCHET_COMPAT_TARGETS=restate|ratchet` runs one side only.
 *
 * Invocation ids in bodies and messages are replaced by the name the scenario gave them (`<cancelled>`), so a message
 * naming the wrong invocation is caught; ids the scenario did not name become `<invocation-id>`, deployment ids
 * `<deployment-id>`.
 */

// --------------------------------------------------------------------------------------------------------------------
// Expected differences

/**
 * Where Ratchet deliberately answers differently. Each entry says what is compared instead at the steps that name
 * it (the status is always compared unless the entry says otherwise).
 */
const DIFFERENCES = {
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

type Difference = (typeof DIFFERENCES)[keyof typeof DIFFERENCES];

// --------------------------------------------------------------------------------------------------------------------
// Services and targets

const SERVICES: ServiceSet = [boxService('Box', 'A'), parentService('Box'), locker, flow];

const names = selectedTargets();
const decoys: DiscoveryOnlyDeployment[] = [];
const targets = useTargets(
  (n) => (n === 'restate' ? startRestateTargetServing(SERVICES) : startRatchetTargetServing(SERVICES)),
  {
    // Handlers still waiting at a gate would keep their SDK streams open.
    beforeStop: () => gates.openAll(),
    alsoClose: () => decoys.map((d) => d.close()),
  },
);

// --------------------------------------------------------------------------------------------------------------------
// Scenario runs

const REQUEST_TIMEOUT_MS = 20_000;
const SCENARIO_TIMEOUT_MS = 120_000;
const INVOCATION_ID_IN_TEXT = /inv_1[0-9A-Za-z]{33}/g;
const DEPLOYMENT_ID_IN_TEXT = /dp_1[0-9A-Za-z]{22}/g;
const JSON_CT = { 'content-type': 'application/json' };
/** Well-formed, never created (from the transcripts). */
const UNKNOWN_ID = 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz';
/** Well-formed, never registered. */
const UNKNOWN_DEPLOYMENT = 'dp_14LsPzKBnJNR2ofNbUKyKXl';

/** One target's run of a scenario: each step's exchange (a poll keeps its last), and the names of its invocations. */
class Run extends RecordedRun {
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

type Runs = Map<TargetName, Run>;

/** Plays `script` on every target at once; restate-server must get through it. */
function play(script: (run: Run) => Promise<void>): Promise<Runs> {
  return playRuns(
    [...targets.values()].map((t) => new Run(t, REQUEST_TIMEOUT_MS)),
    script,
  );
}

// --------------------------------------------------------------------------------------------------------------------
// Comparison

interface Observed {
  status: number;
  'content-type': string | null;
  allow: string | null;
  body: unknown;
}

function normalizeText(text: string, run: Run): string {
  return text
    .replace(INVOCATION_ID_IN_TEXT, (id) => run.labels.get(id) ?? '<invocation-id>')
    .replace(DEPLOYMENT_ID_IN_TEXT, '<deployment-id>')
    .split(run.tag)
    .join('<tag>');
}

function observe(x: Exchange, run: Run): Observed {
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
function withoutServiceCode(o: Observed): Observed {
  const body = o.body;
  if (typeof body !== 'object' || body === null || !('service_code' in body)) return o;
  const { service_code: serviceCode, ...rest } = body as Record<string, unknown>;
  expect.soft(serviceCode, 'service_code equals restate_code').toEqual(rest['restate_code']);
  return { ...o, body: rest };
}

/** What DIFFERENCES.fromPrefixMessage leaves to compare. */
function prefixShape(o: Observed, invocation: string): unknown {
  const body = o.body as { message?: unknown; restate_code?: unknown };
  return {
    status: o.status,
    'content-type': o['content-type'],
    namesTheInvocation: typeof body.message === 'string' && body.message.includes(invocation),
    restate_code: body.restate_code,
  };
}

function stopped(run: Run, step: string): string {
  return `Ratchet did not reach '${step}': ${run.error?.message ?? 'the script skipped it'}`;
}

interface StepOptions {
  /** A listed difference that applies at this step. */
  readonly difference?: Difference;
  /** For DIFFERENCES.fromPrefixMessage: the label of the invocation the message must name. */
  readonly invocation?: string;
}

/**
 * restate-server's answer at `step` must be `expected`; Ratchet's must equal restate-server's (or `expected` when only
 * Ratchet runs), except for what a listed difference excludes.
 */
function expectStep(runs: Runs, step: string, expected: Observed, options: StepOptions = {}): void {
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
function expectRestate(runs: Runs, step: string, expected: Observed, difference: Difference): void {
  expectStep(runs, step, expected, { difference });
}

const EMPTY = (status: number): Observed => ({ status, 'content-type': null, allow: null, body: '' });

function refusal(status: number, message: string): Observed {
  return { status, 'content-type': 'application/json', allow: null, body: { message, restate_code: null } };
}

function queryText(text: string): Observed {
  return { status: 400, 'content-type': 'text/plain; charset=utf-8', allow: null, body: text };
}

function ingressOk(body: unknown): Observed {
  return { status: 200, 'content-type': 'application/json', allow: null, body };
}

function invocationFailure(code: number, message: string): Observed {
  return {
    status: code,
    'content-type': 'application/json',
    allow: null,
    body: { code, message, source: 'invocation' },
  };
}

const OUTPUT_GONE: Observed = {
  status: 404,
  'content-type': 'application/json',
  allow: null,
  body: { code: 404, message: 'invocation not found', source: 'ingress' },
};

const NOT_COMPLETED: Observed = {
  status: 470,
  'content-type': 'application/json',
  allow: null,
  body: { code: 470, message: 'the invocation exists but has not completed yet', source: 'ingress' },
};

/** `label`: the name the scenario gave the new invocation, if any. */
function restarted(label = '<invocation-id>'): Observed {
  return {
    status: 200,
    'content-type': 'application/json',
    allow: null,
    body: { new_invocation_id: label },
  };
}

const msg = RESTATE_INVOCATION_MESSAGES;

/**
 * restate-server pins protocol 6 (without its experimental V7 flag) and Ratchet 7: the decoy deployment (5..=5)
 * supports neither, and the version in the message is normalized by the scenario.
 */
function incompatible(id: string): string {
  return `The invocation '${id}' is running on protocol version '<v>', while the chosen deployment '<deployment-id>' supports the range 5..=5.`;
}

// --------------------------------------------------------------------------------------------------------------------

describe(`invocation-management compatibility (${names.join(' vs ')})`, () => {
  it(
    'cancel and kill; what a completed invocation answers; unknown, malformed, wrong method',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const { invocationId: c } = await run.waiting('start cancelled', 'cancelled');
        await run.admin('cancel', `/invocations/${c}/cancel`);
        await run.output('output after cancel', c);
        await run.admin('cancel again', `/invocations/${c}/cancel`);
        await run.admin('kill completed', `/invocations/${c}/kill`);
        await run.admin('pause completed', `/invocations/${c}/pause`);
        await run.admin('resume completed', `/invocations/${c}/resume`);

        const parent = await run.send('start parent', '/Parent/callWait', run.key('callee'), 'parent');
        const callee = await waitFor(
          () => posted.get(run.key('callee')) ?? Promise.reject(new Error('the callee is not waiting yet')),
        );
        run.label(callee.invocationId, 'callee');
        await run.admin('kill parent', `/invocations/${parent}/kill`);
        await run.output('parent output', parent);
        await run.output('callee output', callee.invocationId);

        for (const op of ['cancel', 'kill', 'pause', 'resume', 'purge', 'purge-journal', 'restart-as-new']) {
          await run.admin(`${op} unknown`, `/invocations/${UNKNOWN_ID}/${op}`);
          await run.admin(`${op} malformed`, `/invocations/inv_bad/${op}`);
        }
        await run.admin('POST cancel', `/invocations/${c}/cancel`, 'POST');
        await run.admin('GET kill', `/invocations/${c}/kill`, 'GET');
      });
      expectStep(runs, 'cancel', EMPTY(202));
      expectStep(runs, 'output after cancel', invocationFailure(409, 'Cancelled'));
      expectStep(runs, 'cancel again', refusal(409, msg.alreadyCompleted('<cancelled>')));
      expectStep(runs, 'kill completed', refusal(409, msg.alreadyCompleted('<cancelled>')));
      expectStep(runs, 'pause completed', refusal(409, msg.notRunning('<cancelled>')));
      expectStep(runs, 'resume completed', refusal(409, msg.completedCannotResume('<cancelled>')));
      expectStep(runs, 'kill parent', EMPTY(200));
      expectStep(runs, 'parent output', invocationFailure(409, 'killed'));
      expectStep(runs, 'callee output', invocationFailure(409, 'killed'));
      for (const op of ['cancel', 'kill', 'pause', 'resume', 'purge', 'purge-journal', 'restart-as-new']) {
        expectStep(runs, `${op} unknown`, refusal(404, msg.notFound('<invocation-id>')));
        expectStep(runs, `${op} malformed`, refusal(400, msg.badInvocationId));
      }
      expectStep(runs, 'POST cancel', { ...EMPTY(405), allow: 'PATCH' });
      expectStep(runs, 'GET kill', { ...EMPTY(405), allow: 'PATCH' });
    },
  );

  it(
    'pause and resume: suspended, inside a ctx.run, an awakeable resolved while paused',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const { invocationId: w, awakeableId } = await run.waiting('start waiter', 'waiter');
        await run.admin('resume waiting', `/invocations/${w}/resume`);
        await run.admin('pause waiting', `/invocations/${w}/pause`);
        await run.paused('pause until paused', w);
        await run.resolve('resolve while paused', awakeableId, 'meanwhile');
        await run.ingress('output while paused', { method: 'GET', path: `/restate/invocation/${w}/output` });
        await run.admin('resume paused', `/invocations/${w}/resume`);
        await run.output('output after resume', w);

        const h = await run.holding('start holder', '/Box/hold', 'holder');
        await run.admin('resume running', `/invocations/${h}/resume`);
        await run.admin('resume running ?deployment=latest', `/invocations/${h}/resume?deployment=latest`);
        await run.admin('restart running', `/invocations/${h}/restart-as-new`);
        await run.admin('purge running', `/invocations/${h}/purge`);
        await run.admin('purge-journal running', `/invocations/${h}/purge-journal`);
        await run.admin('pause running', `/invocations/${h}/pause`);
        await run.admin('pause running again', `/invocations/${h}/pause`);
        gates.open(run.key('holder'));
        await run.paused('pause holder until paused', h);
        await run.admin('resume holder', `/invocations/${h}/resume`);
        await run.output('holder output', h);
      });
      expectStep(runs, 'resume waiting', EMPTY(200));
      expectStep(runs, 'pause waiting', EMPTY(202));
      expectStep(runs, 'pause until paused', EMPTY(200));
      expectStep(runs, 'resolve while paused', EMPTY(202));
      expectStep(runs, 'output while paused', NOT_COMPLETED);
      expectStep(runs, 'resume paused', EMPTY(200));
      expectStep(runs, 'output after resume', ingressOk(`A got meanwhile`));
      expectStep(runs, 'resume running', EMPTY(200));
      expectStep(runs, 'resume running ?deployment=latest', refusal(409, msg.deploymentCannotChange('<holder>')));
      expectStep(runs, 'restart running', refusal(409, msg.stillRunning('<holder>')));
      expectStep(runs, 'purge running', refusal(409, msg.notCompleted('<holder>')));
      expectStep(runs, 'purge-journal running', refusal(409, msg.notCompleted('<holder>')));
      expectStep(runs, 'pause running', EMPTY(202));
      expectRestate(runs, 'pause running again', EMPTY(202), DIFFERENCES.pauseInsideRun);
      expectStep(runs, 'pause holder until paused', EMPTY(200));
      expectStep(runs, 'resume holder', EMPTY(200));
      expectStep(runs, 'holder output', ingressOk('A held <tag>-holder'));
    },
  );

  it('not started yet: inboxed and scheduled invocations', { timeout: SCENARIO_TIMEOUT_MS }, async () => {
    const runs = await play(async (run) => {
      const object = `/Locker/${run.key('object')}/hold`;
      const holder = await run.holding('start holder', object, 'lock');
      const inboxed = await run.send('start inboxed', object, run.key('lock'), 'inboxed');
      await run.admin('resume inboxed', `/invocations/${inboxed}/resume`);
      await run.admin('restart inboxed', `/invocations/${inboxed}/restart-as-new`);
      await run.admin('pause inboxed', `/invocations/${inboxed}/pause`);
      await run.admin('cancel inboxed', `/invocations/${inboxed}/cancel`);
      await run.output('output of cancelled inboxed', inboxed);
      gates.open(run.key('lock'));
      await run.output('holder output', holder);

      const scheduled = await run.send('start scheduled', '/Box/echo', run.key('later'), 'scheduled', '?delay=1h');
      await run.admin('resume scheduled', `/invocations/${scheduled}/resume`);
      await run.admin('restart scheduled', `/invocations/${scheduled}/restart-as-new`);
      await run.admin('pause scheduled', `/invocations/${scheduled}/pause`);
      await run.admin('purge scheduled', `/invocations/${scheduled}/purge`);
      await run.admin('purge-journal scheduled', `/invocations/${scheduled}/purge-journal`);
      await run.admin('kill scheduled', `/invocations/${scheduled}/kill`);
      await run.output('output of killed scheduled', scheduled);
      await run.admin('kill scheduled again', `/invocations/${scheduled}/kill`);
    });
    expectStep(runs, 'resume inboxed', refusal(425, msg.notStartedResume('<inboxed>')));
    expectStep(runs, 'restart inboxed', refusal(425, msg.notStartedRestart('<inboxed>')));
    expectStep(runs, 'pause inboxed', refusal(409, msg.notRunning('<inboxed>')));
    // Never started: cancelling it is done at once (200) and leaves nothing behind.
    expectStep(runs, 'cancel inboxed', EMPTY(200));
    expectStep(runs, 'output of cancelled inboxed', OUTPUT_GONE);
    expectStep(runs, 'holder output', ingressOk('locked <tag>-object'));
    expectStep(runs, 'resume scheduled', refusal(425, msg.notStartedResume('<scheduled>')));
    expectStep(runs, 'restart scheduled', refusal(425, msg.notStartedRestart('<scheduled>')));
    expectStep(runs, 'pause scheduled', refusal(409, msg.notRunning('<scheduled>')));
    expectStep(runs, 'purge scheduled', refusal(409, msg.notCompleted('<scheduled>')));
    expectStep(runs, 'purge-journal scheduled', refusal(409, msg.notCompleted('<scheduled>')));
    expectStep(runs, 'kill scheduled', EMPTY(200));
    expectStep(runs, 'output of killed scheduled', OUTPUT_GONE);
    expectStep(runs, 'kill scheduled again', refusal(404, msg.notFound('<scheduled>')));
  });

  it('purge and purge-journal', { timeout: SCENARIO_TIMEOUT_MS }, async () => {
    const runs = await play(async (run) => {
      const j = await run.call('call journal', '/Box/echo', run.key('journal'), 'journal');
      await run.admin('purge-journal', `/invocations/${j}/purge-journal`);
      await run.output('output after purge-journal', j);
      await run.admin('restart after purge-journal', `/invocations/${j}/restart-as-new`);
      await run.admin('restart from=1 after purge-journal', `/invocations/${j}/restart-as-new?from=1`);
      await run.admin('purge-journal again', `/invocations/${j}/purge-journal`);
      await run.admin('purge', `/invocations/${j}/purge`);
      await run.output('output after purge', j);
      await run.admin('purge again', `/invocations/${j}/purge`);
      await run.admin('purge-journal after purge', `/invocations/${j}/purge-journal`);
      await run.admin('cancel after purge', `/invocations/${j}/cancel`);
    });
    expectStep(runs, 'purge-journal', EMPTY(200));
    expectStep(runs, 'output after purge-journal', ingressOk('<tag>-journal'));
    expectStep(runs, 'restart after purge-journal', refusal(410, msg.inputGone('<journal>')));
    expectStep(runs, 'restart from=1 after purge-journal', refusal(410, msg.inputGone('<journal>')));
    expectStep(runs, 'purge-journal again', EMPTY(200));
    expectStep(runs, 'purge', EMPTY(200));
    expectStep(runs, 'output after purge', OUTPUT_GONE);
    expectStep(runs, 'purge again', refusal(404, msg.notFound('<journal>')));
    expectStep(runs, 'purge-journal after purge', refusal(404, msg.notFound('<journal>')));
    expectStep(runs, 'cancel after purge', refusal(404, msg.notFound('<journal>')));
  });

  it('restart-as-new: from, deployment, and what they refuse', { timeout: SCENARIO_TIMEOUT_MS }, async () => {
    const samePartition = new Map<TargetName, boolean[]>();
    const runs = await play(async (run) => {
      const dp = await run.boxDeployment();
      const again = await run.call('call again', '/Box/echo', run.key('again'), 'again');
      const first = await run.admin('restart', `/invocations/${again}/restart-as-new`);
      const newId = (JSON.parse(first.response.text) as { new_invocation_id: string }).new_invocation_id;
      run.label(newId, 'restarted');
      await run.output('output of restarted', newId);
      const zero = await run.admin('restart from=0', `/invocations/${again}/restart-as-new?from=0`);
      const zeroId = (JSON.parse(zero.response.text) as { new_invocation_id: string }).new_invocation_id;
      samePartition.set(
        run.target.name,
        [newId, zeroId].map((id) => id !== again && id.slice(0, 16) === again.slice(0, 16)),
      );

      const idem = await run.call('call idempotent', '/Box/echo', 'idem', 'idempotent', {
        'idempotency-key': 'restart-me',
      });
      await run.admin('restart idempotent', `/invocations/${idem}/restart-as-new`);
      const wfPath = `/Flow/${run.key('wf')}/run`;
      const wf = await run.call('call workflow', wfPath, 'x', 'workflow');
      await run.admin('restart workflow', `/invocations/${wf}/restart-as-new`);

      const steps = await run.call('call steps', '/Box/steps', run.key('steps'), 'steps');
      const fromTwo = await run.admin('restart from=2', `/invocations/${steps}/restart-as-new?from=2`);
      const fromTwoId = (JSON.parse(fromTwo.response.text) as { new_invocation_id: string }).new_invocation_id;
      await run.output('output of restarted from=2', fromTwoId);
      const restart = (step: string, query: string) => run.admin(step, `/invocations/${steps}/restart-as-new?${query}`);
      await restart('from=2 Keep', 'from=2&deployment=Keep');
      await restart('from=2 keep', 'from=2&deployment=keep');
      await restart('from=2 Latest', 'from=2&deployment=Latest');
      await restart('from=2 latest', 'from=2&deployment=latest');
      await restart('from=2 id', `from=2&deployment=${dp}`);
      await restart('from=2 deployment[Id]', `from=2&deployment[Id]=${dp}`);
      await restart('from=2 JSON object', `from=2&deployment=${encodeURIComponent(JSON.stringify({ Id: dp }))}`);
      await restart('Keep without from', 'deployment=Keep');
      await restart('unknown deployment', `from=2&deployment=${UNKNOWN_DEPLOYMENT}`);
      await restart('deployment=nope', 'from=2&deployment=nope');
      await restart('deployment= (empty)', 'from=2&deployment=');
      await restart('from=6 (journal end)', 'from=6');
      await restart('from=99', 'from=99');
      await restart('from=abc', 'from=abc');
      await restart('from=-1', 'from=-1');
      await restart('from=4294967296', 'from=4294967296');
      await restart('from= (empty)', 'from=');

      const napper = await run.send('start napper', '/Box/nap', run.key('napper'), 'napper');
      await waitFor(() => expect(napping.get(run.key('napper'))).toBe(napper));
      await run.admin('kill napper', `/invocations/${napper}/kill`);
      await run.admin('restart napper from=3', `/invocations/${napper}/restart-as-new?from=3`);
      const fromTwoNap = await run.admin('restart napper from=2', `/invocations/${napper}/restart-as-new?from=2`);
      const napping2 = (JSON.parse(fromTwoNap.response.text) as { new_invocation_id: string }).new_invocation_id;
      run.label(napping2, 'napper-restarted');
      await run.admin('kill restarted napper', `/invocations/${napping2}/kill`);
    });
    for (const [name, same] of samePartition) {
      expect.soft(same, `${name}: new ids differ from the original and share its partition key`).toEqual([true, true]);
    }
    expectStep(runs, 'restart', restarted('<restarted>'));
    expectStep(runs, 'output of restarted', ingressOk('<tag>-again'));
    expectStep(runs, 'restart from=0', restarted());
    expectStep(runs, 'restart idempotent', restarted());
    expectStep(runs, 'restart workflow', refusal(422, msg.workflow('<workflow>')));
    expectStep(runs, 'restart from=2', restarted());
    expectStep(runs, 'output of restarted from=2', ingressOk({ a: 1, b: 2, on: 'A' }));
    for (const step of ['from=2 Keep', 'from=2 keep', 'from=2 Latest', 'from=2 latest', 'from=2 id']) {
      expectStep(runs, step, restarted());
    }
    expectStep(runs, 'from=2 deployment[Id]', restarted());
    expectRestate(
      runs,
      'from=2 JSON object',
      refusal(400, msg.badDeployment('unrecognized resource type: {"Id":"dp')),
      DIFFERENCES.objectFormAsJson,
    );
    expectRestate(runs, 'Keep without from', restarted(), DIFFERENCES.deploymentWithoutFrom);
    expectStep(runs, 'unknown deployment', refusal(400, msg.unknownDeploymentOnRestart('<steps>')));
    expectStep(runs, 'deployment=nope', refusal(400, msg.badDeployment('bad format')));
    expectStep(runs, 'deployment= (empty)', refusal(400, msg.badDeployment('bad length')));
    for (const step of ['from=6 (journal end)', 'from=99']) {
      expectStep(runs, step, refusal(400, msg.prefix('<steps>')), {
        difference: DIFFERENCES.fromPrefixMessage,
        invocation: '<steps>',
      });
    }
    const invalidDigit = 'Failed to deserialize query string: from: invalid digit found in string';
    expectStep(runs, 'from=abc', queryText(invalidDigit));
    expectStep(runs, 'from=-1', queryText(invalidDigit));
    expectStep(
      runs,
      'from=4294967296',
      queryText('Failed to deserialize query string: from: number too large to fit in target type'),
    );
    expectStep(
      runs,
      'from= (empty)',
      queryText('Failed to deserialize query string: from: cannot parse integer from empty string'),
    );
    expectStep(runs, 'kill napper', EMPTY(200));
    expectStep(runs, 'restart napper from=3', refusal(400, msg.prefix('<napper>')), {
      difference: DIFFERENCES.fromPrefixMessage,
      invocation: '<napper>',
    });
    expectStep(runs, 'restart napper from=2', restarted('<napper-restarted>'));
    expectStep(runs, 'kill restarted napper', EMPTY(200));
  });

  it(
    'a deployment that lacks the pinned protocol version, an unknown one, a malformed one',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const decoy = await startDiscoveryOnlyDeployment([`Decoy${run.target.name}`], 5, 5);
        decoys.push(decoy);
        const registered = await httpRequest(run.target.adminUrl, {
          method: 'POST',
          path: '/deployments',
          headers: JSON_CT,
          body: JSON.stringify({ uri: decoy.url }),
        });
        if (registered.status !== 201) throw new Error(`decoy registration answered ${registered.status}`);
        const dp = (JSON.parse(registered.text) as { id: string }).id;

        const { invocationId: w, awakeableId } = await run.waiting('start waiter', 'decoy-waiter');
        await run.admin('pause', `/invocations/${w}/pause`);
        await run.paused('pause until paused', w);
        const decoyAnswer = await run.admin('resume on decoy', `/invocations/${w}/resume?deployment=${dp}`);
        // restate-server pins protocol 6, Ratchet 7 (see `incompatible`).
        const steps = run.steps;
        steps.set('resume on decoy', {
          ...decoyAnswer,
          response: {
            ...decoyAnswer.response,
            text: decoyAnswer.response.text.replace(/protocol version '\d+'/, "protocol version '<v>'"),
          },
        });
        await run.admin('resume on unknown', `/invocations/${w}/resume?deployment=${UNKNOWN_DEPLOYMENT}`);
        await run.admin('resume on nope', `/invocations/${w}/resume?deployment=nope`);
        await run.admin('resume Keep', `/invocations/${w}/resume?deployment=Keep`);
        await run.resolve('resolve', awakeableId, 'kept');
        await run.output('output', w);
        if (decoy.invocations !== 0) throw new Error(`the decoy was invoked ${decoy.invocations} times`);
      });
      expectStep(runs, 'pause', EMPTY(202));
      expectStep(runs, 'resume on decoy', refusal(400, incompatible('<decoy-waiter>')));
      expectStep(runs, 'resume on unknown', refusal(400, msg.unknownDeploymentOnResume('<decoy-waiter>')));
      expectStep(runs, 'resume on nope', refusal(400, msg.badDeployment('bad format')));
      expectStep(runs, 'resume Keep', EMPTY(200));
      expectStep(runs, 'output', ingressOk('A got kept'));
    },
  );

  it('DELETE /invocations/{id}?mode=', { timeout: SCENARIO_TIMEOUT_MS }, async () => {
    const runs = await play(async (run) => {
      const { invocationId: c } = await run.waiting('start by default', 'by-default');
      await run.admin('DELETE', `/invocations/${c}`, 'DELETE');
      await run.output('output after DELETE', c);
      const { invocationId: k } = await run.waiting('start killed', 'killed');
      await run.admin('DELETE mode=Kill', `/invocations/${k}?mode=Kill`, 'DELETE');
      await run.output('output after Kill', k);
      await run.admin('DELETE mode=Purge', `/invocations/${k}?mode=Purge`, 'DELETE');
      await run.output('output after Purge', k);
      await run.admin('DELETE mode=Nope', `/invocations/${c}?mode=Nope`, 'DELETE');
      await run.admin('DELETE mode=Cancel, completed', `/invocations/${c}?mode=Cancel`, 'DELETE');
      await run.admin('DELETE mode=Kill, completed', `/invocations/${c}?mode=Kill`, 'DELETE');
      await run.admin('DELETE mode=purge', `/invocations/${c}?mode=purge`, 'DELETE');
      await run.output('output after purge', c);
      await run.admin('DELETE mode=Cancel, gone', `/invocations/${k}?mode=Cancel`, 'DELETE');
      await run.admin('DELETE mode=kill, gone', `/invocations/${k}?mode=kill`, 'DELETE');
      await run.admin('DELETE mode=Purge, gone', `/invocations/${k}?mode=Purge`, 'DELETE');
      await run.admin('DELETE unknown', `/invocations/${UNKNOWN_ID}`, 'DELETE');
      await run.admin('DELETE malformed', '/invocations/inv_bad?mode=Kill', 'DELETE');
    });
    expectStep(runs, 'DELETE', EMPTY(202));
    expectStep(runs, 'output after DELETE', invocationFailure(409, 'Cancelled'));
    expectStep(runs, 'DELETE mode=Kill', EMPTY(202));
    expectStep(runs, 'output after Kill', invocationFailure(409, 'killed'));
    expectStep(runs, 'DELETE mode=Purge', EMPTY(202));
    expectStep(runs, 'output after Purge', OUTPUT_GONE);
    expectStep(
      runs,
      'DELETE mode=Nope',
      queryText(
        'Failed to deserialize query string: mode: unknown variant `Nope`, expected one of `Cancel`, `cancel`, ' +
          '`Kill`, `kill`, `Purge`, `purge`',
      ),
    );
    // The deprecated DELETE only submits the command: whatever the invocation's state, even gone or unknown, 202.
    expectStep(runs, 'DELETE mode=Cancel, completed', EMPTY(202));
    expectStep(runs, 'DELETE mode=Kill, completed', EMPTY(202));
    expectStep(runs, 'DELETE mode=purge', EMPTY(202));
    expectStep(runs, 'output after purge', OUTPUT_GONE);
    expectStep(runs, 'DELETE mode=Cancel, gone', EMPTY(202));
    expectStep(runs, 'DELETE mode=kill, gone', EMPTY(202));
    expectStep(runs, 'DELETE mode=Purge, gone', EMPTY(202));
    expectStep(runs, 'DELETE unknown', EMPTY(202));
    expectStep(runs, 'DELETE malformed', refusal(400, msg.badInvocationId));
  });
});
