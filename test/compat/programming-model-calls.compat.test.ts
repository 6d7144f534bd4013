import { describe, it } from 'vitest';
import { dumpRun } from './targets.ts';
import {
  accepted,
  bodyId,
  COUNTER_K3_C1,
  EMPTY_202,
  expectIdAgrees,
  expectLetterFrom,
  expectSameId,
  expectStep,
  expectThat,
  get,
  GREETER_EMPTY_KEY,
  GREETER_IDEM_1,
  GREETER_IDEM_2,
  GREETER_UNKNOWN_KEY,
  headerId,
  idOf,
  ingressError,
  INVOCATION_NOT_FOUND,
  JSON_CT,
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
  SIGNUP_NEVER,
  untilCompleted,
  useScenarioTargets,
  WELL_FORMED_UNKNOWN,
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
 * This file: virtual objects, idempotency keys, attach and output. Workflows, awakeables and cancellation:
 * programming-model-workflows.compat.test.ts.
 */

const play = useScenarioTargets();

describe(`programming-model compatibility (${names.join(' vs ')})`, () => {
  it(
    'virtual object: exclusive add, shared get, a URL-encoded key, a delayed send',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const key = `k-${run.tag}`;
        await run.send('add 5', post(`/Counter/${key}/add`, 5));
        await run.send('add 2', post(`/restate/call/Counter/${key}/add`, 2));
        await run.send('get', post(`/Counter/${key}/get`));
        await run.send('encoded add', post(`/Counter/a%2Fb-${run.tag}/add`, 1));
        await run.send('encoded whoami', post(`/Counter/a%2Fb-${run.tag}/whoami`));
        const sent = await run.send('send add 3 delay=1s', post(`/Counter/${key}/add/send?delay=1s`, 3));
        await run.send('attach delayed', get(`/restate/invocation/${idOf(sent)}/attach`));
        await run.send('get after delayed', post(`/Counter/${key}/get`));
      });
      expectStep(runs, 'add 5', ok(5));
      expectStep(runs, 'add 2', ok(7));
      expectStep(runs, 'get', ok(7));
      expectStep(runs, 'encoded add', ok(1));
      expectStep(runs, 'encoded whoami', ok('a/b-<tag>'));
      expectStep(runs, 'send add 3 delay=1s', accepted('Accepted', { executionTime: true }));
      expectStep(runs, 'attach delayed', ok(10), { attachedWhileRunning: true });
      expectStep(runs, 'get after delayed', ok(10));
      onEveryRun(runs, (run, soft) => {
        const prefixes = ['add 5', 'add 2', 'get', 'send add 3 delay=1s'].map((s) => {
          const x = run.steps.get(s);
          return x === undefined ? undefined : headerId(x)?.slice(0, 16);
        });
        expectThat(soft)(new Set(prefixes).size, `one partition key per object key\n${dumpRun(run)}`).toBe(1);
      });
      expectSameId(runs, ['send add 3 delay=1s', 'attach delayed']);
    },
  );

  it(
    'idempotency keys: stored result on repeats, PreviouslyAccepted sends, ids from the spec',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const idem = (key: string): Record<string, string> => ({ ...JSON_CT, 'idempotency-key': key });
        await run.send('call idem-1', post('/Greeter/greet', 'Idem', idem('idem-1')));
        await run.send('call idem-1 again', post('/Greeter/greet', 'Idem', idem('idem-1')));
        await run.send('call idem-1, other body', post('/Greeter/greet', 'Other', idem('idem-1')));
        await run.send('send idem-1', post('/Greeter/greet/send', 'Idem', idem('idem-1')));
        await run.send('send idem-2', post('/Greeter/greet/send', 'Idem2', idem('idem-2')));
        await run.send('send idem-2 again', post('/Greeter/greet/send', 'Idem2', idem('idem-2')));
        await run.send('object c-1', post('/Counter/k3/add', 10, idem('c-1')));
        await run.send('object c-1 again', post('/Counter/k3/add', 10, idem('c-1')));
        await run.send('empty key', post('/Greeter/greet', 'x', idem('')));
        await run.send('empty key, other body', post('/Greeter/greet', 'y', idem('')));
      });
      expectStep(runs, 'call idem-1', ok('Hello Idem!'));
      expectStep(runs, 'call idem-1 again', ok('Hello Idem!', { expires: true }));
      expectStep(runs, 'call idem-1, other body', ok('Hello Idem!', { expires: true }));
      expectStep(runs, 'send idem-1', accepted('PreviouslyAccepted'));
      expectStep(runs, 'send idem-2', accepted('Accepted'));
      expectStep(runs, 'send idem-2 again', accepted('PreviouslyAccepted'));
      expectStep(runs, 'object c-1', ok(10));
      expectStep(runs, 'object c-1 again', ok(10, { expires: true }));
      // An empty idempotency-key header is the key "" (not "no key", as http-api.md §B.4 says): a deterministic id and
      // the stored result on a repeat.
      expectStep(runs, 'empty key', ok('Hello x!'));
      expectStep(runs, 'empty key, other body', ok('Hello x!', { expires: true }));
      expectSameId(
        runs,
        ['call idem-1', 'call idem-1 again', 'call idem-1, other body', 'send idem-1'],
        GREETER_IDEM_1,
      );
      expectSameId(runs, ['send idem-1'], GREETER_IDEM_1, bodyId);
      expectSameId(runs, ['send idem-2', 'send idem-2 again'], GREETER_IDEM_2);
      expectSameId(runs, ['send idem-2', 'send idem-2 again'], GREETER_IDEM_2, bodyId);
      expectSameId(runs, ['object c-1', 'object c-1 again'], COUNTER_K3_C1);
      expectSameId(runs, ['empty key', 'empty key, other body'], GREETER_EMPTY_KEY);
    },
  );

  it(
    'attach and output: by id, by idempotency key, 1.7 POST forms, unknown/malformed ids, 470 while running',
    { timeout: SCENARIO_TIMEOUT_MS },
    async () => {
      const runs = await play(async (run) => {
        const call = await run.send(
          'call attach-1',
          post('/Greeter/greet', 'Att', { ...JSON_CT, 'idempotency-key': 'attach-1' }),
        );
        const id = idOf(call);
        await run.send('output by id', get(`/restate/invocation/${id}/output`));
        await run.send('attach by id', get(`/restate/invocation/${id}/attach`));
        await run.send('output by id (1.7)', get(`/restate/output/${id}`));
        await run.send('attach by id (1.7)', get(`/restate/attach/${id}`));
        await run.send('output by key', get('/restate/invocation/Greeter/greet/attach-1/output'));
        await run.send('attach by key', get('/restate/invocation/Greeter/greet/attach-1/attach'));
        const objectKey = `ka-${run.tag}`;
        await run.send(
          'object call c-2',
          post(`/Counter/${objectKey}/add`, 4, { ...JSON_CT, 'idempotency-key': 'c-2' }),
        );
        await run.send('object output by key', get(`/restate/invocation/Counter/${objectKey}/add/c-2/output`));
        await run.send('output unknown key', get('/restate/invocation/Greeter/greet/unknown-key/output'));
        await run.send('attach unknown key', get('/restate/invocation/Greeter/greet/unknown-key/attach'));
        await run.send('output unknown id', get(`/restate/invocation/${WELL_FORMED_UNKNOWN}/output`));
        await run.send('output malformed id', get('/restate/invocation/inv_garbage/output'));
        await run.send('POST output', post(`/restate/invocation/${id}/output`));

        await run.send(
          'POST /restate/attach invocation',
          post('/restate/attach', { target: 'invocation', invocationId: id }),
        );
        await run.send(
          'POST /restate/output idempotentInvocation',
          post('/restate/output', {
            target: 'idempotentInvocation',
            service: 'Greeter',
            handler: 'greet',
            idempotencyKey: 'attach-1',
          }),
        );
        await run.send(
          'POST /restate/attach idempotentInvocation with key',
          post('/restate/attach', {
            target: 'idempotentInvocation',
            service: 'Counter',
            key: objectKey,
            handler: 'add',
            idempotencyKey: 'c-2',
          }),
        );
        await run.send(
          'lookup idempotentInvocation',
          post('/restate/lookup', {
            target: 'idempotentInvocation',
            service: 'Greeter',
            handler: 'greet',
            idempotencyKey: 'attach-1',
          }),
        );
        await run.send(
          'lookup workflow never run',
          post('/restate/lookup', { target: 'workflow', workflowName: 'Signup', workflowKey: 'never' }),
        );
        await run.send('lookup invocation', post('/restate/lookup', { target: 'invocation', invocationId: id }));
        await run.send('GET lookup', get('/restate/lookup'));
        await run.send(
          'POST /restate/output unknown workflow',
          post('/restate/output', { target: 'workflow', workflowName: 'Signup', workflowKey: 'nobody' }),
        );

        // Still running: blocked on an awakeable until the test resolves it.
        const mailboxKey = `att-${run.tag}`;
        const sent = await run.send('send waiter', post('/Waiter/wait/send', mailboxKey));
        const waiting = idOf(sent);
        const letter = await letterFrom(run, 'letter', mailboxKey);
        await run.send('output while running', get(`/restate/invocation/${waiting}/output`));
        await run.send('output while running (1.7)', get(`/restate/output/${waiting}`));
        const attached = run.start('attach while running', get(`/restate/invocation/${waiting}/attach`));
        await run.send('resolve', post(`/restate/awakeables/${letter.awakeableId}/resolve`, { approved: true }));
        await attached;
        await untilCompleted(run, 'output after completion', `/restate/invocation/${waiting}/output`);
        await run.send('attach after completion', get(`/restate/invocation/${waiting}/attach`));
      });

      const stored = ok('Hello Att!', { expires: true });
      expectStep(runs, 'call attach-1', ok('Hello Att!'));
      const storedSteps = [
        'output by id',
        'attach by id',
        'output by id (1.7)',
        'attach by id (1.7)',
        'output by key',
        'attach by key',
        'POST /restate/attach invocation',
        'POST /restate/output idempotentInvocation',
      ];
      for (const step of storedSteps) expectStep(runs, step, stored);
      expectSameId(runs, ['call attach-1', ...storedSteps]);
      expectIdAgrees(runs, 'call attach-1');
      expectSameId(runs, ['lookup idempotentInvocation', 'lookup invocation'], undefined, bodyId);
      expectIdAgrees(runs, 'lookup idempotentInvocation', bodyId);
      onEveryRun(runs, (run, soft) => {
        const call = run.steps.get('call attach-1');
        const lookup = run.steps.get('lookup idempotentInvocation');
        if (call === undefined || lookup === undefined) return;
        expectThat(soft)(bodyId(lookup), `${run.target.name}: lookup vs call id`).toBe(headerId(call));
      });

      expectStep(runs, 'object call c-2', ok(4));
      expectStep(runs, 'object output by key', ok(4, { expires: true }));
      expectStep(runs, 'POST /restate/attach idempotentInvocation with key', ok(4, { expires: true }));
      expectSameId(runs, [
        'object call c-2',
        'object output by key',
        'POST /restate/attach idempotentInvocation with key',
      ]);

      expectStep(runs, 'output unknown key', NOT_FOUND);
      expectStep(runs, 'attach unknown key', INVOCATION_NOT_FOUND);
      expectSameId(runs, ['attach unknown key'], GREETER_UNKNOWN_KEY);
      expectStep(runs, 'output unknown id', NOT_FOUND);
      expectStep(
        runs,
        'output malformed id',
        ingressError(400, "bad invocation id 'inv_garbage': unrecognized codec version"),
      );
      expectStep(runs, 'POST output', ingressError(405, 'method not allowed'));

      expectStep(runs, 'lookup idempotentInvocation', LOOKUP);
      expectStep(runs, 'lookup workflow never run', LOOKUP);
      expectSameId(runs, ['lookup workflow never run'], SIGNUP_NEVER, bodyId);
      expectStep(runs, 'lookup invocation', LOOKUP);
      expectStep(runs, 'GET lookup', ingressError(405, 'method not allowed'));
      expectStep(runs, 'POST /restate/output unknown workflow', NOT_FOUND);

      const result = { got: { approved: true } };
      expectStep(runs, 'send waiter', accepted('Accepted'));
      expectStep(runs, 'letter', LETTER, { body: letterShape });
      expectLetterFrom(runs, 'send waiter', 'letter');
      expectStep(runs, 'output while running', NOT_COMPLETED);
      expectStep(runs, 'output while running (1.7)', NOT_COMPLETED);
      expectStep(runs, 'resolve', EMPTY_202);
      expectStep(runs, 'attach while running', ok(result), { attachedWhileRunning: true });
      expectStep(runs, 'output after completion', ok(result, { expires: true }));
      expectStep(runs, 'attach after completion', ok(result, { expires: true }));
      expectSameId(runs, ['send waiter', 'attach while running', 'output after completion', 'attach after completion']);
    },
  );
});
