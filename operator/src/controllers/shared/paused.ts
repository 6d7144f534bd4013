import { PAUSE_ANNOTATION, PAUSE_VALUE } from '../../api/v1alpha1/index.ts';
import type { KubeObject } from '../../kube/types.ts';

export const RECONCILIATION_PAUSED = 'ReconciliationPaused';

export function isPaused(obj: KubeObject): boolean {
  return obj.metadata.annotations?.[PAUSE_ANNOTATION] === PAUSE_VALUE;
}

export const PAUSED_MESSAGE = `reconciliation is paused by the annotation ${PAUSE_ANNOTATION}=${PAUSE_VALUE}; deletion still proceeds`;
