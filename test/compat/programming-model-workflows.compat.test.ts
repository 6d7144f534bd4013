import { describe, it } from 'vitest';
import { describeExchange } from './targets.ts';
import {
  accepted,
  bodyId,
  EMPTY_202,
  expectAdmin,
  expectLetterFrom,
  expectSameId,
  expectStep,
  expectThat,
  get,
  headerId,
  idOf,
  ingressError,
  INVOCATION_NOT_FOUND,
  invocationFailure,
  json,
  JSON_CT,
  type Letter,
  LETTER,
  letterFrom,
  letterShape,
  LOOKUP,
  names,
  NOT_COMPLETED,
  NOT_FOUND,
  ok,
  onEveryRun,
  post,
  SCENARIO_TIMEOUT_MS,
  SIGNUP_NOBODY,
  SIGNUP_U1,
  untilCompleted,
  useScenarioTargets,
  WORKFLOW_IDEMPOTENCY,
} from './programming-model-support.ts';

/**
 * Programming-model compatibility: virtual objects, idempotency, attach/output, workflows and durable promises,
 * awakeables and cancellation, each scenario played step by step against the real restate-server 1.7.12 and against
 * Ratchet (each with its own SDK endpoint serving the services of programming-model-support.ts). restate-server's answers are checked against
 * what the transcripts in shared/spec say; Ratchet's must then equal restate-server's after normalization (ids, times
 * and the per-target tag reduced to placeholders). Ratchet mismatches are soft: a scenario reports every step where
 * Ratchet differs, not just the first. `RATCHET_COMPAT_TARGETS=restate|ratchet` runs one side only.
 *
 * Ids that are a pure function of identical inputs (workflow key, idempotency key; shared/spec/http-api.md §D) use
 * untagged keys, so they must be byte-equal on both targets and equal to the spec's test vectors. Everything else
 * carries the target's tag.
 *
 * This file: workflows and durable promises, awakeables, cancellation. Virtual objects, idempotency keys, attach and
 * output: programming-model-calls.compat.test.ts.
 */

const play = useScenarioTargets();

describe(`programming-model compatibility (${names.join(' vs ')})`, () => {
  it(
    'workflow: submit, durable promise, shared handlers, attach/output, run twice, promise completed twice',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const input = { email: 'u1@x' };
        const wf = { target: 'workflow', workflowName: 'Signup', workflowKey: 'u1' };
        await run.send('status before run', post('/Signup/u1/status'));
        await run.send('submit', post('/Signup/u1/run/send', input));
        await run.send('submit again', post('/Signup/u1/run/send', input));
        await run.until('status waiting', post('/Signup/u1/status'), (x) => x.response.text === '"waiting"');
        await run.send('output while running', get('/restate/workflow/Signup/u1/output'));
        await run.send('POST /restate/output while running', post('/restate/output', wf));
        const attached = run.start('attach while running', get('/restate/workflow/Signup/u1/attach'));
        await run.send('approve', post('/Signup/u1/approve', 'yes'));
        await attached;
        await untilCompleted(run, 'output', '/restate/workflow/Signup/u1/output');
        await run.send('attach after completion', get('/restate/workflow/Signup/u1/attach'));
        await run.send('POST /restate/output', post('/restate/output', wf));
        await run.send('POST /restate/attach', post('/restate/attach', wf));
        await run.send('lookup', post('/restate/lookup', wf));
        await run.send('status after run', post('/Signup/u1/status'));
        await run.send('approve again', post('/Signup/u1/approve', 'again'));
        await run.send('call run after completion', post('/Signup/u1/run', { email: 'again' }));
        await run.send('submit after completion', post('/Signup/u1/run/send', { email: 'again' }));
        await run.send('output unknown key', get('/restate/workflow/Signup/nobody/output'));
        await run.send('attach unknown key', get('/restate/workflow/Signup/nobody/attach'));
        await run.send('output not a workflow', get('/restate/workflow/Greeter/x/output'));
        const idem = { ...JSON_CT, 'idempotency-key': 'w1' };
        await run.send('submit with idempotency key', post('/Signup/u2/run/send', {}, idem));
        await run.send('call with idempotency key', post('/Signup/u2/run', {}, idem));
        await run.send(
          'shared handler with idempotency key',
          post('/Signup/u2/status', undefined, { 'idempotency-key': 'w2' }),
        );
      });

      const result = { user: 'u1', approvedWith: 'yes', req: { email: 'u1@x' } };
      expectStep(runs, 'status before run', ok('unknown'));
      expectStep(runs, 'submit', accepted('Accepted'));
      expectStep(runs, 'submit again', accepted('PreviouslyAccepted'));
      expectStep(runs, 'status waiting', ok('waiting'));
      expectStep(runs, 'output while running', NOT_COMPLETED);
      expectStep(runs, 'POST /restate/output while running', NOT_COMPLETED);
      expectStep(runs, 'approve', ok('approved'));
      expectStep(runs, 'attach while running', ok(result), { attachedWhileRunning: true });
      expectStep(runs, 'output', ok(result, { expires: true }));
      expectStep(runs, 'attach after completion', ok(result, { expires: true }));
      expectStep(runs, 'POST /restate/output', ok(result, { expires: true }));
      expectStep(runs, 'POST /restate/attach', ok(result, { expires: true }));
      expectStep(runs, 'lookup', LOOKUP);
      expectStep(runs, 'status after run', ok('approved'));
      // Completing a completed durable promise: the CompletePromise command fails with 409, which the handler
      // (awaiting resolve()) turns into its own terminal failure.
      expectStep(runs, 'approve again', invocationFailure(409, 'promise was already completed'));
      expectStep(runs, 'call run after completion', invocationFailure(409, 'the workflow method was already invoked'));
      expectStep(runs, 'submit after completion', accepted('PreviouslyAccepted'));
      expectStep(runs, 'output unknown key', NOT_FOUND);
      expectStep(runs, 'attach unknown key', INVOCATION_NOT_FOUND);
      expectStep(runs, 'output not a workflow', NOT_FOUND);
      expectStep(runs, 'submit with idempotency key', ingressError(400, WORKFLOW_IDEMPOTENCY));
      expectStep(runs, 'call with idempotency key', ingressError(400, WORKFLOW_IDEMPOTENCY));
      expectStep(runs, 'shared handler with idempotency key', ok('unknown'));

      expectSameId(
        runs,
        [
          'submit',
          'submit again',
          'attach while running',
          'output',
          'attach after completion',
          'POST /restate/output',
          'POST /restate/attach',
          'call run after completion',
          'submit after completion',
        ],
        SIGNUP_U1,
      );
      expectSameId(runs, ['submit', 'submit again', 'submit after completion', 'lookup'], SIGNUP_U1, bodyId);
      expectSameId(runs, ['attach unknown key'], SIGNUP_NOBODY);
      onEveryRun(runs, (run, soft) => {
        // Shared handlers are invocations of their own on the workflow key's partition.
        const status = run.steps.get('status waiting');
        if (status === undefined) return;
        const context = `${run.target.name}: shared handler id\n${describeExchange(status)}`;
        expectThat(soft)(headerId(status)?.slice(0, 16), context).toBe(SIGNUP_U1.slice(0, 16));
        expectThat(soft)(headerId(status), context).not.toBe(SIGNUP_U1);
      });
    },
  );

  it(
    'awakeables: resolve, resolve again, reject via /restate/a, malformed id, wrong method and op',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const first = idOf(await run.send('send waiter 1', post('/Waiter/wait/send', `awk1-${run.tag}`)));
        const letter1 = await letterFrom(run, 'letter 1', `awk1-${run.tag}`);
        await run.send('GET resolve', get(`/restate/awakeables/${letter1.awakeableId}/resolve`));
        await run.send('unknown op', post(`/restate/awakeables/${letter1.awakeableId}/foo`));
        const attached = run.start('attach resolved', get(`/restate/invocation/${first}/attach`));
        await run.send('resolve', post(`/restate/awakeables/${letter1.awakeableId}/resolve`, { approved: true }));
        await attached;
        await untilCompleted(run, 'output resolved', `/restate/invocation/${first}/output`);
        await run.send(
          'resolve again',
          post(`/restate/awakeables/${letter1.awakeableId}/resolve`, { approved: false }),
        );
        await run.send('output after resolve again', get(`/restate/invocation/${first}/output`));

        const second = idOf(await run.send('send waiter 2', post('/Waiter/wait/send', `awk2-${run.tag}`)));
        const letter2 = await letterFrom(run, 'letter 2', `awk2-${run.tag}`);
        const rejected = run.start('attach rejected', get(`/restate/invocation/${second}/attach`));
        await run.send('reject via /restate/a', {
          method: 'POST',
          path: `/restate/a/${letter2.awakeableId}/reject`,
          headers: { 'content-type': 'text/plain' },
          body: 'nope, rejected',
        });
        await rejected;
        await untilCompleted(run, 'output rejected', `/restate/invocation/${second}/output`);

        await run.send('resolve malformed id', post('/restate/awakeables/prom_garbage/resolve', 1));
      });
      const result = { got: { approved: true } };
      expectStep(runs, 'send waiter 1', accepted('Accepted'));
      expectStep(runs, 'letter 1', LETTER, { body: letterShape });
      expectLetterFrom(runs, 'send waiter 1', 'letter 1');
      expectStep(runs, 'GET resolve', ingressError(405, 'method not allowed'));
      expectStep(runs, 'unknown op', ingressError(404, 'not found'));
      expectStep(runs, 'resolve', EMPTY_202);
      expectStep(runs, 'attach resolved', ok(result), { attachedWhileRunning: true });
      expectStep(runs, 'output resolved', ok(result, { expires: true }));
      expectStep(runs, 'resolve again', EMPTY_202);
      expectStep(runs, 'output after resolve again', ok(result, { expires: true }));
      expectStep(runs, 'send waiter 2', accepted('Accepted'));
      expectStep(runs, 'letter 2', LETTER, { body: letterShape });
      expectStep(runs, 'reject via /restate/a', EMPTY_202);
      expectStep(runs, 'attach rejected', invocationFailure(500, 'nope, rejected'), { attachedWhileRunning: true });
      expectStep(runs, 'output rejected', invocationFailure(500, 'nope, rejected', { expires: true }));
      expectStep(
        runs,
        'resolve malformed id',
        ingressError(400, "bad awakeable id 'prom_garbage': unrecognized codec version"),
      );
      expectSameId(runs, ['send waiter 1', 'attach resolved', 'output resolved', 'output after resolve again']);
      expectSameId(runs, ['send waiter 2', 'attach rejected', 'output rejected']);
    },
  );

  it(
    'cancellation: cancelling a parent through the admin API cancels the child it waits for',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const mailboxKey = `cxl-${run.tag}`;
        const parentId = idOf(await run.send('send parent', post('/Parent/callWaiter/send', mailboxKey)));
        const letter = await letterFrom(run, 'letter', mailboxKey);
        await run.send('child output while waiting', get(`/restate/invocation/${letter.invocationId}/output`));
        const attached = run.start('attach parent', get(`/restate/invocation/${parentId}/attach`));
        await run.admin('cancel', { method: 'PATCH', path: `/invocations/${parentId}/cancel` });
        await attached;
        await untilCompleted(run, 'parent output', `/restate/invocation/${parentId}/output`);
        await untilCompleted(run, 'child output', `/restate/invocation/${letter.invocationId}/output`);
        await run.admin('cancel again', { method: 'PATCH', path: `/invocations/${parentId}/cancel` });
      });
      expectStep(runs, 'send parent', accepted('Accepted'));
      expectStep(runs, 'letter', LETTER, { body: letterShape });
      expectStep(runs, 'child output while waiting', NOT_COMPLETED);
      expectAdmin(runs, 'cancel', { status: 202, 'content-type': null, body: '' });
      expectStep(runs, 'attach parent', invocationFailure(409, 'Cancelled'), { attachedWhileRunning: true });
      expectStep(runs, 'parent output', invocationFailure(409, 'Cancelled', { expires: true }));
      expectStep(runs, 'child output', invocationFailure(409, 'Cancelled', { expires: true }));
      expectAdmin(runs, 'cancel again', {
        status: 409,
        'content-type': 'application/json',
        body: { message: "The invocation '<invocation-id>' was already completed.", restate_code: null },
      });
      expectSameId(runs, ['send parent', 'attach parent', 'parent output']);
      onEveryRun(runs, (run, soft) => {
        const letter = run.steps.get('letter');
        const child = run.steps.get('child output');
        if (letter === undefined || child === undefined) return;
        expectThat(soft)(headerId(child), `${run.target.name}: child id`).toBe(json<Letter>(letter).invocationId);
        expectThat(soft)(headerId(child), `${run.target.name}: child id`).not.toBe(
          headerId(run.steps.get('send parent')!),
        );
      });
    },
  );
});
