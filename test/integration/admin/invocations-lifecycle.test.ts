import { describe, expect, it } from 'vitest';
import { waitFor } from '../../support/wait.ts';
import { ENTRY, admin, gates, posted, resolveAwakeable, sendTo } from './invocations-support.ts';
import {
  adminUrl,
  completed,
  expectEmpty,
  expectInvocationFailure,
  expectRefusal,
  finalOutput,
  holding,
  ingressUrl,
  msg,
  output,
  patch,
  rows,
  sleeping,
  statusBecomes,
  UNKNOWN_ID,
  until,
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
 * This file: cancel, kill, pause and resume. Purge, restart-as-new, DELETE and deployment changes:
 * invocations-restart.test.ts.
 */

describe('invocation management (admin API)', () => {
  useInvocationRuntime();

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
});
