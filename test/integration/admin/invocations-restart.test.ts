import { beforeAll, describe, expect, it } from 'vitest';
import { DeploymentId } from '../../../runtime/src/ids/deployment-id.ts';
import { registerDeployment, registerEndpoint } from '../../support/registration.ts';
import { startEndpoint } from '../../support/sdk-endpoint.ts';
import { call } from '../support/runtime.ts';
import {
  ENTRY,
  admin,
  refusal,
  resolveAwakeable,
  sideEffects,
  startDiscoveryOnlyDeployment,
  type DiscoveryOnlyDeployment,
  type Posted,
  type Steps,
} from './invocations-support.ts';
import {
  adminUrl,
  closeAfter,
  completed,
  expectEmpty,
  expectInvocationFailure,
  expectQueryText,
  expectRefusal,
  finalOutput,
  ingressUrl,
  moverB,
  msg,
  newIdOf,
  output,
  patch,
  rows,
  runtime,
  sleeping,
  statusBecomes,
  UNKNOWN_ID,
  useInvocationRuntime,
  waiting,
} from './invocations-runtime.ts';

/**
 * Invocation management through the admin API (shared/spec/000_…txt §3, §4.1, §7.1; http-api.md §A.4; the
 * "Invocation management (admin)" transcripts): cancel, kill, pause, resume, purge, purge-journal, restart-as-new and
 * the deprecated DELETE, each provoked for real against SDK services over h2 and h1, with every status and restate's
 * message, and the effect checked where a user would see it (ingress output, journal and invocation rows).
 *
 * Messages not in the transcripts were read from restate-server 1.7.12 itself (same requests, see
 * test/compat/invocations-*.compat.test.ts).
 *
 * This file: purge, purge-journal, restart-as-new, the deprecated DELETE, and changing the deployment. Cancel, kill,
 * pause and resume: invocations-lifecycle.test.ts.
 */

describe('invocation management (admin API)', () => {
  useInvocationRuntime();

  describe('purge', () => {
    it('200 for a completed invocation: its output is gone (404), a second purge 404', async () => {
      const id = await completed('/Box/echo', 'to purge');
      expect((await output(id)).status).toBe(200);
      expectEmpty(await patch(`/invocations/${id}/purge`), 200);
      const gone = await output(id);
      expect({ status: gone.status, body: gone.json }).toEqual({
        status: 404,
        body: { code: 404, message: 'invocation not found', source: 'ingress' },
      });
      expect(await rows.invocation(id)).toBeUndefined();
      expect(await rows.journal(id)).toEqual([]);
      expectRefusal(await patch(`/invocations/${id}/purge`), 404, msg.notFound(id));
      expectRefusal(await patch(`/invocations/${id}/cancel`), 404, msg.notFound(id));
    });
  });

  describe('purge-journal', () => {
    it('200 for a completed invocation: the result is still served, the journal rows are gone, restart-as-new 410', async () => {
      const id = await completed('/Tally/echo', 'keep my result');
      expect((await rows.journal(id)).length).toBeGreaterThan(0);
      expectEmpty(await patch(`/invocations/${id}/purge-journal`), 200);
      expect(await rows.journal(id)).toEqual([]);
      const res = await output(id);
      expect({ status: res.status, body: res.json }).toEqual({ status: 200, body: 'keep my result' });
      expect((await rows.invocation(id))?.status).toBe('completed');

      expectRefusal(await patch(`/invocations/${id}/restart-as-new`), 410, msg.inputGone(id));
      expectRefusal(await patch(`/invocations/${id}/restart-as-new?from=1`), 410, msg.inputGone(id));
      // Purging a journal that is gone already is accepted again (as restate-server does).
      expectEmpty(await patch(`/invocations/${id}/purge-journal`), 200);
    });
  });

  describe('restart-as-new', () => {
    it('200 with a new id in the same partition; the new invocation runs the same input and records restarted_from', async () => {
      const id = await completed('/Box/echo', 'again');
      const newId = newIdOf(await patch(`/invocations/${id}/restart-as-new`), id);
      const res = await finalOutput(newId);
      expect({ status: res.status, body: res.json }).toEqual({ status: 200, body: 'again' });
      const row = await rows.invocation(newId);
      expect({ restartedFrom: row?.restarted_from, invokedBy: row?.invoked_by }).toEqual({
        restartedFrom: id,
        invokedBy: 'restart_as_new',
      });
      // `from=0` is the default.
      const second = newIdOf(await patch(`/invocations/${id}/restart-as-new?from=0`), id);
      expect(second).not.toBe(newId);
      expect((await finalOutput(second)).json).toBe('again');
    });

    it('200 for an idempotent invocation; 422 for a workflow run', async () => {
      const idem = await call(ingressUrl, '/Box/echo', 'idem', { 'idempotency-key': 'restart-me' });
      expect(idem.status).toBe(200);
      const idemId = idem.headers.get('x-restate-id')!;
      const newId = newIdOf(await patch(`/invocations/${idemId}/restart-as-new`), idemId);
      expect((await finalOutput(newId)).json).toBe('idem');

      const run = await call(ingressUrl, '/Flow/wf-1/run', 'x');
      expect(run.status).toBe(200);
      const wfId = run.headers.get('x-restate-id')!;
      expectRefusal(await patch(`/invocations/${wfId}/restart-as-new`), 422, msg.workflow(wfId));
    });

    it('from=N (h1) copies the journal prefix: the first side effect is not run again, the second is', async () => {
      const id = await completed('/Tally/steps', 'two-runs');
      expect(sideEffects.get('two-runs:first')).toBe(1);
      expect(sideEffects.get('two-runs:second')).toBe(1);
      const journal = await rows.journal(id);
      expect(journal.map((e) => e.entry_type)).toEqual([
        ENTRY.Input,
        ENTRY.Run,
        ENTRY.RunCompletion,
        ENTRY.Run,
        ENTRY.RunCompletion,
        ENTRY.Output,
      ]);
      // Restart from the first run's completion (entry 2).
      const newId = newIdOf(await patch(`/invocations/${id}/restart-as-new?from=2`), id);
      const res = await finalOutput(newId);
      expect({ status: res.status, body: res.json }).toEqual({ status: 200, body: { a: 1, b: 2, on: 'h1' } });
      expect(sideEffects.get('two-runs:first')).toBe(1);
      expect(sideEffects.get('two-runs:second')).toBe(2);
      expect((await rows.journal(newId)).map((e) => e.entry_type)).toEqual([
        ENTRY.Input,
        ENTRY.Run,
        ENTRY.RunCompletion,
        ENTRY.Run,
        ENTRY.RunCompletion,
        ENTRY.Output,
      ]);
      expect((await rows.invocation(newId))?.restarted_from).toBe(id);
    });

    it('400 for a from whose prefix has an uncompleted command (a killed sleeper), past the journal end, or deployment without from', async () => {
      const id = await sleeping('Tally', 'killed-sleeper');
      expectEmpty(await patch(`/invocations/${id}/kill`), 200);
      await statusBecomes(id, 'completed');
      expect((await rows.journal(id)).map((e) => e.entry_type)).toEqual([
        ENTRY.Input,
        ENTRY.Run,
        ENTRY.RunCompletion,
        ENTRY.Sleep,
      ]);
      // Prefix errors: restate's wording is "The prefix of the journal '<id>' up to 'from' (included) contains some
      // Commands without respective Completions."; Ratchet's names the missing completions (a listed difference).
      for (const from of [3, 4, 99]) {
        const res = await patch(`/invocations/${id}/restart-as-new?from=${from}`);
        expect({ status: res.status, contentType: res.headers.get('content-type') }, res.text).toEqual({
          status: 400,
          contentType: 'application/json',
        });
        const body = res.json as Record<string, unknown>;
        expect({ ...body, message: typeof body['message'] }).toEqual(refusal('string'));
        expect(body['message']).toContain(id);
      }
      // The prefix up to the completed ctx.run is fine (the new invocation then sleeps: kill it).
      const newId = newIdOf(await patch(`/invocations/${id}/restart-as-new?from=2`), id);
      await statusBecomes(newId, 'suspended');
      expectEmpty(await patch(`/invocations/${newId}/kill`), 200);

      const echo = await completed('/Box/echo', 'short');
      for (const deployment of ['Keep', 'Latest']) {
        const res = await patch(`/invocations/${echo}/restart-as-new?deployment=${deployment}`);
        expect({ status: res.status, contentType: res.headers.get('content-type') }, res.text).toEqual({
          status: 400,
          contentType: 'application/json',
        });
      }
    });

    it('a from that is not an unsigned 32-bit integer → 400 text (axum); a malformed or empty deployment → 400', async () => {
      const id = await completed('/Box/echo', 'bad from');
      const invalid = 'Failed to deserialize query string: from: invalid digit found in string';
      expectQueryText(await patch(`/invocations/${id}/restart-as-new?from=abc`), invalid);
      expectQueryText(await patch(`/invocations/${id}/restart-as-new?from=-1`), invalid);
      expectQueryText(
        await patch(`/invocations/${id}/restart-as-new?from=4294967296`),
        'Failed to deserialize query string: from: number too large to fit in target type',
      );
      expectQueryText(
        await patch(`/invocations/${id}/restart-as-new?from=`),
        'Failed to deserialize query string: from: cannot parse integer from empty string',
      );
      expectRefusal(
        await patch(`/invocations/${id}/restart-as-new?from=1&deployment=nope`),
        400,
        msg.badDeployment('bad format'),
      );
      expectRefusal(
        await patch(`/invocations/${id}/restart-as-new?from=1&deployment=`),
        400,
        "The query parameter 'deployment' is invalid. Reason: bad length",
      );
    });
  });

  describe('DELETE /invocations/{id}?mode=', () => {
    it('Cancel (also the default), Kill and Purge → 202 with their effect', async () => {
      const { invocationId: cancelled } = await waiting('Tally', 'delete-cancel');
      expectEmpty(await admin(adminUrl, `/invocations/${cancelled}?mode=Cancel`, 'DELETE'), 202);
      expectInvocationFailure(await finalOutput(cancelled), 409, 'Cancelled');

      const { invocationId: byDefault } = await waiting('Tally', 'delete-default');
      expectEmpty(await admin(adminUrl, `/invocations/${byDefault}`, 'DELETE'), 202);
      expectInvocationFailure(await finalOutput(byDefault), 409, 'Cancelled');

      const killed = await sleeping('Box', 'delete-kill');
      expectEmpty(await admin(adminUrl, `/invocations/${killed}?mode=Kill`, 'DELETE'), 202);
      expectInvocationFailure(await finalOutput(killed), 409, 'killed');

      expectEmpty(await admin(adminUrl, `/invocations/${killed}?mode=Purge`, 'DELETE'), 202);
      expect((await output(killed)).status).toBe(404);
      expect(await rows.invocation(killed)).toBeUndefined();
    });

    it('an unknown mode → 400 text listing the variants restate accepts (lowercase ones too)', async () => {
      const id = await completed('/Box/echo', 'delete modes');
      expectQueryText(
        await admin(adminUrl, `/invocations/${id}?mode=Nope`, 'DELETE'),
        'Failed to deserialize query string: mode: unknown variant `Nope`, expected one of `Cancel`, `cancel`, ' +
          '`Kill`, `kill`, `Purge`, `purge`',
      );
      expectEmpty(await admin(adminUrl, `/invocations/${id}?mode=purge`, 'DELETE'), 202);
      expect(await rows.invocation(id)).toBeUndefined();
    });

    it('only submits the command: 202 whatever the state (completed, purged, unknown), as restate-server', async () => {
      const id = await completed('/Box/echo', 'delete is fire-and-forget');
      expectEmpty(await admin(adminUrl, `/invocations/${id}?mode=Cancel`, 'DELETE'), 202, true);
      expectEmpty(await admin(adminUrl, `/invocations/${id}?mode=Kill`, 'DELETE'), 202, true);
      expect((await output(id)).json).toBe('delete is fire-and-forget');
      expectEmpty(await admin(adminUrl, `/invocations/${id}?mode=Purge`, 'DELETE'), 202, true);
      expectEmpty(await admin(adminUrl, `/invocations/${id}?mode=Purge`, 'DELETE'), 202, true);
      expectEmpty(await admin(adminUrl, `/invocations/${id}?mode=Kill`, 'DELETE'), 202, true);
      expectEmpty(await admin(adminUrl, `/invocations/${UNKNOWN_ID}`, 'DELETE'), 202, true);
      expectRefusal(await admin(adminUrl, '/invocations/inv_bad?mode=Kill', 'DELETE'), 400, msg.badInvocationId);
    });
  });

  // ------------------------------------------------------------------------------------------------------------------

  describe('changing the deployment (a second deployment of the same service)', () => {
    let dpA: string;
    let dpB: string;
    let dpDecoy: string;
    let decoy: DiscoveryOnlyDeployment | undefined;
    /** Mover/steps completed on A before B existed. */
    let stepsId: string;
    /** Mover/wait invocations started on A before B existed (suspended). */
    let movesToB: Posted;
    let staysOnA: Posted;

    beforeAll(async () => {
      dpA = (await rows.invocation(await completed('/Mover/echo', 'pin')))!.deployment_id!;
      expect(dpA).toMatch(/^dp_/);
      stepsId = await completed('/Mover/steps', 'mover-steps');
      expect((await rows.invocation(stepsId))?.deployment_id).toBe(dpA);
      movesToB = await waiting('Mover', 'moves-to-b');
      staysOnA = await waiting('Mover', 'stays-on-a');

      // B serves Mover too and is registered last: it becomes Mover's latest deployment.
      const moverOnB = closeAfter(await startEndpoint({ services: [moverB], transport: 'h1' }));
      dpB = (await registerEndpoint(runtime, moverOnB)).id;

      // Registration accepts it (it intersects 5..7), but it cannot run an invocation pinned to protocol 7.
      decoy = closeAfter(await startDiscoveryOnlyDeployment(['Decoy'], 5, 6));
      const d = await registerDeployment(adminUrl, decoy.url);
      expect(d.status).toBe(201);
      dpDecoy = d.body['id'] as string;
    });

    async function pause({ invocationId: id }: Posted): Promise<void> {
      const row = await rows.invocation(id);
      expect({ dp: row?.deployment_id, version: row?.protocol_version }).toEqual({ dp: dpA, version: 7 });
      expectEmpty(await patch(`/invocations/${id}/pause`), 202);
      await statusBecomes(id, 'paused');
    }

    it('resume ?deployment=<id of B> on a paused invocation: it continues on B', async () => {
      await pause(movesToB);
      const { invocationId: id, awakeableId } = movesToB;
      expectEmpty(await patch(`/invocations/${id}/resume?deployment=${dpB}`), 200);
      expect((await rows.invocation(id))?.deployment_id).toBe(dpB);
      expect(await resolveAwakeable(ingressUrl, awakeableId, 'there')).toBe(202);
      const res = await finalOutput(id);
      expect({ status: res.status, body: res.json }).toEqual({ status: 200, body: 'B got there' });
      expect((await rows.invocation(id))?.deployment_id).toBe(dpB);
    });

    it('resume with a deployment lacking the pinned protocol version → 400, with an unknown one → 400', async () => {
      await pause(staysOnA);
      const { invocationId: id, awakeableId } = staysOnA;
      expectRefusal(
        await patch(`/invocations/${id}/resume?deployment=${dpDecoy}`),
        400,
        msg.incompatible(id, 7, dpDecoy, 5, 6),
      );
      const unknown = DeploymentId.generate();
      expectRefusal(
        await patch(`/invocations/${id}/resume?deployment=${unknown}`),
        400,
        msg.unknownDeploymentOnResume(id),
      );
      expect({ status: (await rows.invocation(id))?.status, dp: (await rows.invocation(id))?.deployment_id }).toEqual({
        status: 'paused',
        dp: dpA,
      });
      expect(decoy?.invocations).toBe(0);

      expectEmpty(await patch(`/invocations/${id}/resume?deployment=Keep`), 200);
      expect(await resolveAwakeable(ingressUrl, awakeableId, 'here')).toBe(202);
      expect((await finalOutput(id)).json).toBe('A got here');
    });

    /** Restarts Mover/steps from entry 2 with `query`, and returns the new invocation's pin and output. */
    async function restartSteps(query: string): Promise<{ dp: string | null; out: Steps }> {
      const newId = newIdOf(await patch(`/invocations/${stepsId}/restart-as-new?from=2${query}`), stepsId);
      const res = await finalOutput(newId);
      expect(res.status, res.text).toBe(200);
      const out = res.json as Steps;
      // The first ctx.run came from the copied prefix; only the second ran again.
      expect(out.a).toBe(1);
      expect(sideEffects.get('mover-steps:first')).toBe(1);
      expect(out.b).toBe(sideEffects.get('mover-steps:second'));
      return { dp: (await rows.invocation(newId))!.deployment_id, out };
    }

    it('restart-as-new from=N pins Keep, Latest, an id, or the object form {"Id":…}; without a choice the latest', async () => {
      expect(await restartSteps('&deployment=Keep')).toMatchObject({ dp: dpA, out: { on: 'A' } });
      expect(await restartSteps('&deployment=keep')).toMatchObject({ dp: dpA, out: { on: 'A' } });
      expect(await restartSteps('&deployment=Latest')).toMatchObject({ dp: dpB, out: { on: 'B' } });
      expect(await restartSteps('&deployment=latest')).toMatchObject({ dp: dpB, out: { on: 'B' } });
      expect(await restartSteps(`&deployment=${dpA}`)).toMatchObject({ dp: dpA, out: { on: 'A' } });
      const objectForm = encodeURIComponent(JSON.stringify({ Id: dpA }));
      expect(await restartSteps(`&deployment=${objectForm}`)).toMatchObject({ dp: dpA, out: { on: 'A' } });
      expect(await restartSteps('')).toMatchObject({ dp: dpB, out: { on: 'B' } });
    });

    it("restart-as-new accepts restate-server's own encoding of the object form, deployment[Id]=…", async () => {
      expect(await restartSteps(`&deployment[Id]=${dpA}`)).toMatchObject({ dp: dpA, out: { on: 'A' } });
    });

    it('restart-as-new from=N with a deployment lacking the pinned protocol version or an unknown one → 400', async () => {
      expectRefusal(
        await patch(`/invocations/${stepsId}/restart-as-new?from=2&deployment=${dpDecoy}`),
        400,
        msg.incompatible(stepsId, 7, dpDecoy, 5, 6),
      );
      expectRefusal(
        await patch(`/invocations/${stepsId}/restart-as-new?from=2&deployment=${DeploymentId.generate()}`),
        400,
        msg.unknownDeploymentOnRestart(stepsId),
      );
      expect(decoy?.invocations).toBe(0);
    });
  });
});
