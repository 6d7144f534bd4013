import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeploymentId } from '../../../runtime/src/ids/deployment-id.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerDeployment, registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { WAIT_INTERVAL_MS, WAIT_TIMEOUT_MS, waitFor } from '../../support/wait.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import {
  ENTRY,
  Rows,
  admin,
  boxService,
  flow,
  gates,
  ingressGet,
  locker,
  napping,
  parentService,
  posted,
  refusal,
  resolveAwakeable,
  sendTo,
  sideEffects,
  startDiscoveryOnlyDeployment,
  type Answer,
  type DiscoveryOnlyDeployment,
  type Posted,
  type Steps,
  RESTATE_INVOCATION_MESSAGES,
} from './invocations-support.ts';

/**
 * Invocation management through the admin API (shared/spec/000_…txt §3, §4.1, §7.1; http-api.md §A.4; the
 * "Invocation management (admin)" transcripts): cancel, kill, pause, resume, purge, purge-journal, restart-as-new and
 * the deprecated DELETE, each provoked for real against SDK services over h2 and h1, with every status and restate's
 * message, and the effect checked where a user would see it (ingress output, journal and invocation rows).
 *
 * Messages not in the transcripts were read from restate-server 1.7.12 itself (same requests, see
 * test/compat/invocations.compat.test.ts).
 */

const until = { timeout: WAIT_TIMEOUT_MS, interval: WAIT_INTERVAL_MS };
const INVOCATION_ID = /^inv_1[0-9A-Za-z]{33}$/;
/** Well-formed, never created (from the transcripts). */
const UNKNOWN_ID = 'inv_1gdJBtdVEcM942bjcDmb1c1khoaJe11Hbz';

const box = boxService('Box', 'h2');
const tally = boxService('Tally', 'h1');
const moverA = boxService('Mover', 'A');
const moverB = boxService('Mover', 'B');

const msg = RESTATE_INVOCATION_MESSAGES;

/**
 * A JSON refusal: status, content-type and restate's body (plus the `service_code` the spec names). Soft, so a test
 * goes on and reports every refusal that differs, not only the first.
 */
function expectRefusal(res: Answer, status: number, message: string): void {
  expect.soft({ status: res.status, contentType: res.headers.get('content-type'), body: res.json }, res.text).toEqual({
    status,
    contentType: 'application/json',
    body: refusal(message),
  });
}

/** A success without body (202/200 of cancel, kill, pause, resume, purge…). */
function expectEmpty(res: Answer, status: number, soft = false): void {
  (soft ? expect.soft : expect)({ status: res.status, text: res.text }).toEqual({ status, text: '' });
}

/** axum's plain-text 400 for a query string it cannot deserialize (soft, like `expectRefusal`). */
function expectQueryText(res: Answer, text: string): void {
  expect.soft({ status: res.status, contentType: res.headers.get('content-type'), text: res.text }).toEqual({
    status: 400,
    contentType: 'text/plain; charset=utf-8',
    text,
  });
}

function newIdOf(res: Answer, original: string): string {
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json');
  const body = res.json as { new_invocation_id?: unknown };
  expect(Object.keys(body)).toEqual(['new_invocation_id']);
  const id = body.new_invocation_id as string;
  expect(id).toMatch(INVOCATION_ID);
  expect(id).not.toBe(original);
  // Same partition key: the first 16 characters (`inv_` + the key's half) are equal.
  expect(id.slice(0, 16)).toBe(original.slice(0, 16));
  return id;
}

describe('invocation management (admin API)', () => {
  let database: TestDatabase;
  let rows: Rows;
  let runtime: TestRuntime;
  let h2: SdkEndpoint;
  let h1: SdkEndpoint;
  let moverOnB: SdkEndpoint | undefined;
  let decoy: DiscoveryOnlyDeployment | undefined;
  let adminUrl: string;
  let ingressUrl: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    rows = await Rows.connect(database.url);
    // h2 attempts that wait on an awakeable are closed after 500 ms, so the SDK suspends.
    runtime = await startTestRuntime(database.url, { RATCHET_INVOKER_INACTIVITY_TIMEOUT: '500ms' });
    adminUrl = runtime.adminUrl;
    ingressUrl = runtime.ingressUrl;
    h2 = await startEndpoint({ services: [box, parentService('Box'), locker, flow, moverA], transport: 'h2' });
    h1 = await startEndpoint({ services: [tally], transport: 'h1' });
    await registerEndpoint(runtime, h2);
    await registerEndpoint(runtime, h1);
  });

  afterAll(async () => {
    gates.openAll();
    await rows?.close();
    await runtime?.stop();
    await h2?.close();
    await h1?.close();
    await moverOnB?.close();
    await decoy?.close();
    await database?.drop();
  });

  const patch = (path: string): Promise<Answer> => admin(adminUrl, path);
  const output = (id: string): Promise<Answer> => ingressGet(ingressUrl, `/restate/invocation/${id}/output`);

  /** Polls the invocation's row (usable in hooks too, unlike expect.poll). */
  async function statusBecomes(id: string, status: string): Promise<void> {
    await waitFor(async () => expect(await rows.status(id)).toBe(status));
  }

  /** Sends `<service>/wait` and returns once it posted its awakeable and suspended. */
  async function waiting(service: string, key: string): Promise<Posted> {
    await sendTo(ingressUrl, `/${service}/wait`, key);
    const p = await waitFor(() => posted.get(key) ?? Promise.reject(new Error(`no awakeable from ${key} yet`)));
    await statusBecomes(p.invocationId, 'suspended');
    return p;
  }

  /** Sends `<service>/nap` and returns once it is sleeping (suspended). */
  async function sleeping(service: string, key: string): Promise<string> {
    await sendTo(ingressUrl, `/${service}/nap`, key);
    const id = await waitFor(() => napping.get(key) ?? Promise.reject(new Error(`${key} not napping yet`)));
    await statusBecomes(id, 'suspended');
    return id;
  }

  /** Sends `<service>/hold` and returns once its attempt is inside the ctx.run waiting at gate `key`. */
  async function holding(path: string, key: string): Promise<string> {
    const id = await sendTo(ingressUrl, path, key);
    await waitFor(() => expect(gates.reached(key)).toBe(true));
    expect(await rows.status(id)).toBe('invoked');
    return id;
  }

  async function completed(path: string, body: unknown): Promise<string> {
    const res = await call(ingressUrl, path, body);
    expect(res.status, res.text).toBe(200);
    return res.headers.get('x-restate-id')!;
  }

  /** Waits for the ingress output of `id` to be final (not 470) and returns it. */
  async function finalOutput(id: string): Promise<Answer> {
    return waitFor(async () => {
      const res = await output(id);
      if (res.status === 470) throw new Error(`${id} has not completed yet`);
      return res;
    });
  }

  function expectInvocationFailure(res: Answer, code: number, message: string): void {
    expect({ status: res.status, body: res.json }).toEqual({
      status: code,
      body: { code, message, source: 'invocation' },
    });
  }

  // ------------------------------------------------------------------------------------------------------------------

  describe('cancel', () => {
    it('202 for a suspended invocation, which then fails with 409 Cancelled; again → 409 already completed', async () => {
      const { invocationId: id } = await waiting('Box', 'cancel-me');
      expectEmpty(await patch(`/invocations/${id}/cancel`), 202);
      expectInvocationFailure(await finalOutput(id), 409, 'Cancelled');
      expectRefusal(await patch(`/invocations/${id}/cancel`), 409, msg.alreadyCompleted(id));
    });

    it('404 for an unknown id, 400 for a malformed one, 405 with allow: PATCH for another method', async () => {
      expectRefusal(await patch(`/invocations/${UNKNOWN_ID}/cancel`), 404, msg.notFound(UNKNOWN_ID));
      expectRefusal(await patch('/invocations/inv_bad/cancel'), 400, msg.badInvocationId);
      const post = await admin(adminUrl, `/invocations/${UNKNOWN_ID}/cancel`, 'POST');
      expect({ status: post.status, allow: post.headers.get('allow'), text: post.text }).toEqual({
        status: 405,
        allow: 'PATCH',
        text: '',
      });
    });

    it('every operation answers 404 for an unknown id and 400 for a malformed one', async () => {
      for (const op of ['kill', 'pause', 'resume', 'purge', 'purge-journal', 'restart-as-new']) {
        expectRefusal(await patch(`/invocations/${UNKNOWN_ID}/${op}`), 404, msg.notFound(UNKNOWN_ID));
        expectRefusal(await patch(`/invocations/inv_bad/${op}`), 400, msg.badInvocationId);
      }
    });
  });

  describe('kill', () => {
    it('200 for a suspended invocation (h1), which then fails with 409 killed; again → 409 already completed', async () => {
      const id = await sleeping('Tally', 'kill-me');
      expectEmpty(await patch(`/invocations/${id}/kill`), 200);
      expectInvocationFailure(await finalOutput(id), 409, 'killed');
      const row = await rows.invocation(id);
      expect({ status: row?.status, code: row?.failure_code, message: row?.failure_message }).toEqual({
        status: 'completed',
        code: 409,
        message: 'killed',
      });
      expectRefusal(await patch(`/invocations/${id}/kill`), 409, msg.alreadyCompleted(id));
    });

    it('killing a parent waiting on a request-response call kills the callee too', async () => {
      const parentId = await sendTo(ingressUrl, '/Parent/callWait', 'callee');
      const callee = await waitFor(() => posted.get('callee') ?? Promise.reject(new Error('callee not waiting yet')));
      expect(callee.invocationId).not.toBe(parentId);
      await statusBecomes(callee.invocationId, 'suspended');

      expectEmpty(await patch(`/invocations/${parentId}/kill`), 200);
      expectInvocationFailure(await finalOutput(parentId), 409, 'killed');
      expectInvocationFailure(await finalOutput(callee.invocationId), 409, 'killed');
    });
  });

  describe('pause and resume', () => {
    it('a running invocation: resume is a no-op (200), a deployment change 409; pause 202, again 200; resume completes it', async () => {
      const id = await holding('/Box/hold', 'hold-1');
      expectEmpty(await patch(`/invocations/${id}/resume`), 200);
      expect(await rows.status(id)).toBe('invoked');
      expectRefusal(await patch(`/invocations/${id}/resume?deployment=latest`), 409, msg.deploymentCannotChange(id));
      expectRefusal(await patch(`/invocations/${id}/restart-as-new`), 409, msg.stillRunning(id));
      expectRefusal(await patch(`/invocations/${id}/purge`), 409, msg.notCompleted(id));
      expectRefusal(await patch(`/invocations/${id}/purge-journal`), 409, msg.notCompleted(id));

      expectEmpty(await patch(`/invocations/${id}/pause`), 202);
      await statusBecomes(id, 'paused');
      expectEmpty(await patch(`/invocations/${id}/pause`), 200);

      gates.open('hold-1');
      // Nothing runs a paused invocation: the ingress still finds it unfinished.
      expect((await output(id)).status).toBe(470);
      expect(await rows.status(id)).toBe('paused');

      expectEmpty(await patch(`/invocations/${id}/resume`), 200);
      const res = await finalOutput(id);
      expect({ status: res.status, body: res.json }).toEqual({ status: 200, body: 'h2 held hold-1' });
    });

    it('a suspended invocation: pause 202; its awakeable resolved meanwhile does not wake it until resume', async () => {
      const { invocationId: id, awakeableId } = await waiting('Box', 'paused-waiter');
      expectEmpty(await patch(`/invocations/${id}/pause`), 202);
      await statusBecomes(id, 'paused');
      expectEmpty(await patch(`/invocations/${id}/pause`), 200);

      expect(await resolveAwakeable(ingressUrl, awakeableId, 'meanwhile')).toBe(202);
      // The awakeable's completion is journaled (signal index ≥ 17) in the same commit that would have woken it up.
      await expect
        .poll(
          async () => (await rows.journal(id)).some((e) => e.entry_type === ENTRY.Signal && e.signal_idx! >= 17),
          until,
        )
        .toBe(true);
      expect(await rows.status(id)).toBe('paused');
      expect((await output(id)).status).toBe(470);

      expectEmpty(await patch(`/invocations/${id}/resume`), 200);
      const res = await finalOutput(id);
      expect({ status: res.status, body: res.json }).toEqual({ status: 200, body: 'h2 got meanwhile' });
      expect((await rows.invocation(id))?.status).toBe('completed');
    });

    it('a suspended invocation (h1): resume 200 replays it, and it suspends again on what it still awaits', async () => {
      const { invocationId: id, awakeableId } = await waiting('Tally', 'resumed-early');
      expectEmpty(await patch(`/invocations/${id}/resume`), 200);
      await statusBecomes(id, 'suspended');
      expect(await resolveAwakeable(ingressUrl, awakeableId, 'later')).toBe(202);
      const res = await finalOutput(id);
      expect({ status: res.status, body: res.json }).toEqual({ status: 200, body: 'h1 got later' });
    });

    it('a completed invocation: pause 409 "not running", resume 409 "completed"', async () => {
      const id = await completed('/Box/echo', 'done');
      expectRefusal(await patch(`/invocations/${id}/pause`), 409, msg.notRunning(id));
      expectRefusal(await patch(`/invocations/${id}/resume`), 409, msg.completedCannotResume(id));
    });

    it('an inboxed invocation (exclusive handler of a busy key): resume and restart-as-new 425, pause 409', async () => {
      const holder = await holding('/Locker/busy/hold', 'locker-1');
      const inboxed = await sendTo(ingressUrl, '/Locker/busy/hold', 'locker-1');
      await statusBecomes(inboxed, 'inboxed');
      expectRefusal(await patch(`/invocations/${inboxed}/resume`), 425, msg.notStartedResume(inboxed));
      expectRefusal(await patch(`/invocations/${inboxed}/restart-as-new`), 425, msg.notStartedRestart(inboxed));
      expectRefusal(await patch(`/invocations/${inboxed}/pause`), 409, msg.notRunning(inboxed));
      expect(await rows.status(inboxed)).toBe('inboxed');

      gates.open('locker-1');
      expect((await finalOutput(holder)).json).toBe('locked busy');
      expect((await finalOutput(inboxed)).json).toBe('locked busy');
    });

    it('a scheduled invocation (delayed send): resume and restart-as-new 425, pause and purge 409', async () => {
      const id = await sendTo(ingressUrl, '/Box/echo', 'later', '?delay=1h');
      expect(await rows.status(id)).toBe('scheduled');
      expectRefusal(await patch(`/invocations/${id}/resume`), 425, msg.notStartedResume(id));
      expectRefusal(await patch(`/invocations/${id}/restart-as-new`), 425, msg.notStartedRestart(id));
      expectRefusal(await patch(`/invocations/${id}/pause`), 409, msg.notRunning(id));
      expectRefusal(await patch(`/invocations/${id}/purge`), 409, msg.notCompleted(id));
      expect(await rows.status(id)).toBe('scheduled');
      expectEmpty(await patch(`/invocations/${id}/kill`), 200);
    });

    it('cancel or kill of an invocation that never started: 200, and nothing is left of it (as restate-server)', async () => {
      const holder = await holding('/Locker/busy-2/hold', 'locker-2');
      const notStarted = [
        { op: 'cancel', what: 'inboxed', id: await sendTo(ingressUrl, '/Locker/busy-2/hold', 'locker-2') },
        { op: 'kill', what: 'inboxed', id: await sendTo(ingressUrl, '/Locker/busy-2/hold', 'locker-2') },
        { op: 'cancel', what: 'scheduled', id: await sendTo(ingressUrl, '/Box/echo', 'never', '?delay=1h') },
        { op: 'kill', what: 'scheduled', id: await sendTo(ingressUrl, '/Box/echo', 'never', '?delay=1h') },
      ];
      for (const { op, what, id } of notStarted) {
        await statusBecomes(id, what);
        const res = await patch(`/invocations/${id}/${op}`);
        expect.soft({ op, what, status: res.status, text: res.text }).toEqual({ op, what, status: 200, text: '' });
        const out = await finalOutput(id);
        expect.soft({ op, what, status: out.status, body: out.json }).toEqual({
          op,
          what,
          status: 404,
          body: { code: 404, message: 'invocation not found', source: 'ingress' },
        });
        // Nothing is left for anyone to see: a second kill does not find it (the row itself goes with the cleaner).
        const again = await patch(`/invocations/${id}/kill`);
        expect.soft({ op, what, again: again.status }).toEqual({ op, what, again: 404 });
      }
      gates.open('locker-2');
      expect((await finalOutput(holder)).json).toBe('locked busy-2');
    });

    it("a bad deployment query → 400 with restate's message", async () => {
      const { invocationId: id } = await waiting('Tally', 'bad-deployment-query');
      expectEmpty(await patch(`/invocations/${id}/pause`), 202);
      await statusBecomes(id, 'paused');
      expectRefusal(await patch(`/invocations/${id}/resume?deployment=nope`), 400, msg.badDeployment('bad format'));
      expect(await rows.status(id)).toBe('paused');
      expectEmpty(await patch(`/invocations/${id}/kill`), 200);
    });
  });

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
      moverOnB = await startEndpoint({ services: [moverB], transport: 'h1' });
      dpB = (await registerEndpoint(runtime, moverOnB)).id;

      // Registration accepts it (it intersects 5..7), but it cannot run an invocation pinned to protocol 7.
      decoy = await startDiscoveryOnlyDeployment(['Decoy'], 5, 6);
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
