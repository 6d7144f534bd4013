import { describe, it } from 'vitest';
import { gates, posted } from '../integration/admin/invocations-support.ts';
import { waitFor } from '../support/wait.ts';
import {
  DIFFERENCES,
  EMPTY,
  expectRestate,
  expectStep,
  ingressOk,
  invocationFailure,
  msg,
  names,
  NOT_COMPLETED,
  OUTPUT_GONE,
  refusal,
  SCENARIO_TIMEOUT_MS,
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
 * This file: cancel, kill, pause, resume, invocations not started yet, purge. Restart-as-new, deployments and the
 * deprecated DELETE: invocations-restart.compat.test.ts.
 */

const play = useScenarioTargets();

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
});
