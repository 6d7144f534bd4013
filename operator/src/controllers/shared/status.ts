import { FIELD_MANAGER } from '../../api/v1alpha1/index.ts';
import type { Condition, KubeObject } from '../../kube/types.ts';
import { setConditions, type ConditionInput } from '../../reconcile/conditions.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { PAUSED_MESSAGE, RECONCILIATION_PAUSED } from './paused.ts';

export interface StatusShape {
  observedGeneration?: number;
  conditions?: Condition[];
}

/**
 * A draft of one object's status: reconcile steps edit it, `flush()` writes it through the status subresource only
 * when it differs from what was last read or written, so an unchanged object causes no watch event (operator.md §6.5).
 * The whole status is sent each time: with server-side apply, a field this manager no longer sends is removed.
 */
export class StatusDraft<S extends StatusShape> {
  status: S;
  private written: string;

  constructor(
    private readonly ctx: ReconcileContext,
    private readonly obj: KubeObject & { status?: S },
  ) {
    this.status = structuredClone(obj.status ?? ({} as S));
    this.written = JSON.stringify(this.status);
  }

  get generation(): number {
    return this.obj.metadata.generation ?? 0;
  }

  conditions(...updates: ConditionInput[]): this {
    this.status.conditions = setConditions(this.status.conditions, updates, this.generation, this.ctx.now());
    return this;
  }

  condition(type: string): Condition | undefined {
    return this.status.conditions?.find((c) => c.type === type);
  }

  observed(): this {
    this.status.observedGeneration = this.generation;
    return this;
  }

  async flush(): Promise<void> {
    const text = JSON.stringify(this.status);
    if (text === this.written) return;
    await this.ctx.kube.applyStatus(
      {
        apiVersion: this.obj.apiVersion,
        kind: this.obj.kind,
        metadata: {
          name: this.obj.metadata.name,
          ...(this.obj.metadata.namespace === undefined ? {} : { namespace: this.obj.metadata.namespace }),
        },
        status: this.status,
      },
      { fieldManager: FIELD_MANAGER, force: true },
    );
    this.written = text;
  }
}

/** A paused object gets only `Reconciling=False, ReconciliationPaused`; nothing else of it changes. */
export async function writePaused(ctx: ReconcileContext, obj: KubeObject & { status?: StatusShape }): Promise<void> {
  const draft = new StatusDraft(ctx, obj);
  draft.conditions({ type: 'Reconciling', status: 'False', reason: RECONCILIATION_PAUSED, message: PAUSED_MESSAGE });
  await draft.flush();
}

/**
 * Status on first sight of a generation, before any slow step: kstatus counts a missing Ready as ready, and GitOps
 * tools compare observedGeneration with generation, so both must be there at once.
 */
export async function writeFirstSight<S extends StatusShape>(draft: StatusDraft<S>): Promise<void> {
  if (draft.status.observedGeneration === draft.generation && draft.condition('Ready') !== undefined) return;
  if (draft.condition('Ready') === undefined) {
    draft.conditions({ type: 'Ready', status: 'Unknown', reason: 'Reconciling', message: 'first reconcile' });
  }
  draft.conditions({
    type: 'Reconciling',
    status: 'True',
    reason: 'Progressing',
    message: `reconciling generation ${draft.generation}`,
  });
  draft.observed();
  await draft.flush();
}
