import type { HandlerSchema, ServiceType } from '../schema/types.ts';

/** One journal entry as kept in memory: the stored protocol payload plus what lookups need. */
export interface JournalEntry {
  index: number;
  type: number;
  raw: Uint8Array;
  completionId?: number | undefined;
  signalIdx?: number | undefined;
  signalName?: string | undefined;
  /** Notifications only: true = value or void, false = failure. */
  success?: boolean | undefined;
}

export interface Failure {
  code: number;
  message: string;
  metadata?: Record<string, string> | undefined;
}

export type Outcome = { kind: 'success'; value: Uint8Array } | { kind: 'failure'; failure: Failure };

export interface CompletedInvocation {
  id: string;
  outcome: Outcome;
  completedAt: Date;
  completionRetentionMs: number | null;
}

export type InvokedBy = 'ingress' | 'service' | 'subscription' | 'restart_as_new';

export interface AcceptRequest {
  service: { name: string; ty: ServiceType };
  handler: HandlerSchema;
  key?: string | undefined;
  body: Uint8Array;
  headers: [string, string][];
  delayMs?: number | undefined;
  idempotencyKey?: string | undefined;
  invokedBy: InvokedBy;
}

export interface AcceptResult {
  id: string;
  /** false = an invocation with this id already existed (idempotency key / workflow key). */
  created: boolean;
  executionTime?: Date | undefined;
}
