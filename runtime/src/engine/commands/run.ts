import type { AttemptHandle } from '../../invoker/invoker.ts';
import { REQUESTED_ACK_FLAG, encodeFrame, type Frame } from '../../protocol/framing.ts';
import { MessageType } from '../../protocol/message-types.ts';
import * as codec from '../codec.ts';
import { type InvocationCtx } from '../invocation.ts';
import { type PartitionProcessor, ownWrite } from '../processor.ts';

export function onRunProposal(p: PartitionProcessor, ctx: InvocationCtx, attempt: AttemptHandle, frame: Frame): void {
  const proposal = codec.proposeRunCompletion(frame.payload);
  if (ctx.hasCompletion(proposal.completionId)) {
    // A proposal for an already completed run (a replay race): the stored result stands.
    return;
  }
  const now = new Date();
  const op = ownWrite(ctx);
  const entry = p.appendEntry(
    ctx,
    op,
    {
      type: MessageType.RunCompletionNotification,
      raw: codec.notification({ kind: 'completion', id: proposal.completionId }, proposal.result),
      completionId: proposal.completionId,
      success: proposal.result.kind !== 'failure',
    },
    now,
  );
  const wantsAck = ctx.protocolVersion !== null && ctx.protocolVersion >= 7 && (frame.flags & REQUESTED_ACK_FLAG) !== 0;
  void p.commit(ctx, op, () => {
    // The ack (or the full notification) goes out only now that the result is durable.
    if (ctx.attempt !== attempt || !attempt.canSend) return;
    if (wantsAck) attempt.send(codec.runAckFrame(proposal.completionId));
    else attempt.send(encodeFrame(entry.type, entry.raw));
  });
}
