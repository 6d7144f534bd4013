import { describe, expect, it } from 'vitest';
import { napping, startDiscoveryOnlyDeployment } from '../integration/admin/invocations-support.ts';
import { waitFor } from '../support/wait.ts';
import { httpRequest, type TargetName } from './targets.ts';
import {
  decoys,
  DIFFERENCES,
  EMPTY,
  expectRestate,
  expectStep,
  incompatible,
  ingressOk,
  invocationFailure,
  JSON_CT,
  msg,
  names,
  OUTPUT_GONE,
  queryText,
  refusal,
  restarted,
  SCENARIO_TIMEOUT_MS,
  UNKNOWN_DEPLOYMENT,
  UNKNOWN_ID,
  useScenarioTargets,
} from './invocations-compat-support.ts';

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
 *
 * This file: restart-as-new, a deployment lacking the pinned protocol version, the deprecated DELETE. Cancel, kill,
 * pause, resume and purge: invocations-lifecycle.compat.test.ts.
 */

const play = useScenarioTargets();

describe(`invocation-management compatibility (${names.join(' vs ')})`, () => {
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
