import { describe, expect, it } from 'vitest';
import { renderService, toJsonText, type RenderContext } from '../../../runtime/src/schema/render.ts';
import type { ActiveService, HandlerSchema, ServiceDefaults } from '../../../runtime/src/schema/types.ts';

const DAY = 86_400_000;

const DEFAULTS: ServiceDefaults = {
  idempotencyRetentionMs: DAY,
  journalRetentionMs: DAY,
  maxJournalRetentionMs: 7 * DAY,
  workflowCompletionRetentionMs: DAY,
  inactivityTimeoutMs: 60_000,
  abortTimeoutMs: 600_000,
  retryPolicy: {
    initialIntervalMs: 500,
    exponentiationFactor: 2,
    maxAttempts: 70,
    maxIntervalMs: 60_000,
    onMaxAttempts: 'Pause',
  },
};
const BIDI: RenderContext = { protocolType: 'BidiStream', defaults: DEFAULTS };

function handler(name: string, settings: Partial<HandlerSchema> = {}): HandlerSchema {
  return {
    name,
    input: { contentType: 'application/json', required: false },
    output: { contentType: 'application/json', setContentTypeIfEmpty: false },
    retryPolicy: {},
    ...settings,
  };
}

describe('admin ServiceMetadata', () => {
  it('shows a journal retention above the server maximum reduced to it, with an RT0022 note, as restate does', () => {
    const service: ActiveService = {
      schema: {
        name: 'Greeter',
        ty: 'Service',
        handlers: [handler('greet', { journalRetentionMs: 30 * DAY })],
        retryPolicy: {},
        journalRetentionMs: 10 * DAY,
      },
      revision: 1,
      deploymentId: 'dp_1',
      overrides: {},
    };
    const note = {
      code: 'RT0022',
      message: 'The configured journal_retention is clamped to the maximum server limit.',
    };
    const json = renderService(service, BIDI);
    expect(json).toMatchObject({ journal_retention: '7d', info: [note] });
    expect(json.handlers[0]).toMatchObject({ journal_retention: '7d', info: [note] });
    expect(toJsonText(json)).toContain('"retry_policy":{"initial_interval":"500ms","exponentiation_factor":2.0,');
  });

  it("shows a workflow's SDK completion retention over a PATCH, and a handler made public by the SDK as public", () => {
    const service: ActiveService = {
      schema: {
        name: 'Signup',
        ty: 'Workflow',
        handlers: [
          handler('run', { ty: 'Workflow', workflowCompletionRetentionMs: 3 * DAY }),
          handler('status', { ty: 'Shared', ingressPrivate: false }),
          handler('approve', { ty: 'Shared' }),
        ],
        retryPolicy: {},
        workflowCompletionRetentionMs: 3 * DAY,
      },
      revision: 2,
      deploymentId: 'dp_1',
      overrides: { public: false, workflowCompletionRetentionMs: 2 * DAY },
    };
    const json = renderService(service, BIDI);
    expect(json).toMatchObject({ public: false, workflow_completion_retention: '3d' });
    expect(json.handlers.map((h) => [h.name, h.public])).toEqual([
      ['run', false],
      ['status', true],
      ['approve', false],
    ]);
  });
});
