import { describe, expect, it } from 'vitest';
import { effectiveHandlerSettings, invocationRetention } from '../../../runtime/src/schema/handler-settings.ts';
import type {
  ActiveService,
  HandlerSchema,
  ServiceDefaults,
  ServiceOverrides,
  ServiceSchema,
} from '../../../runtime/src/schema/types.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const DEFAULTS: ServiceDefaults = {
  idempotencyRetentionMs: DAY,
  journalRetentionMs: DAY,
  maxJournalRetentionMs: undefined,
  workflowCompletionRetentionMs: DAY,
  inactivityTimeoutMs: MINUTE,
  abortTimeoutMs: 10 * MINUTE,
  retryPolicy: {
    initialIntervalMs: 500,
    exponentiationFactor: 2,
    maxAttempts: 70,
    maxIntervalMs: MINUTE,
    onMaxAttempts: 'Pause',
  },
};

function handler(name: string, settings: Partial<HandlerSchema> = {}): HandlerSchema {
  return { name, input: { required: false }, output: { setContentTypeIfEmpty: false }, retryPolicy: {}, ...settings };
}

function service(schema: Partial<ServiceSchema>, overrides: ServiceOverrides = {}): ActiveService {
  return {
    schema: { name: 'Svc', ty: 'Service', handlers: [], retryPolicy: {}, ...schema },
    revision: 1,
    deploymentId: 'dp_1',
    overrides,
  };
}

describe('effectiveHandlerSettings', () => {
  it('takes the server defaults when neither the manifest nor the admin API sets anything', () => {
    const greet = handler('greet');
    expect(effectiveHandlerSettings(service({ handlers: [greet] }), greet, DEFAULTS)).toEqual({
      public: true,
      idempotencyRetentionMs: DAY,
      workflowCompletionRetentionMs: undefined,
      journalRetentionMs: DAY,
      journalRetentionClamped: false,
      inactivityTimeoutMs: MINUTE,
      abortTimeoutMs: 10 * MINUTE,
      enableLazyState: false,
      retryPolicy: DEFAULTS.retryPolicy,
    });
  });

  it('prefers the handler to the admin API to the service manifest to the default', () => {
    const own = handler('own', {
      idempotencyRetentionMs: 1 * HOUR,
      journalRetentionMs: 2 * HOUR,
      inactivityTimeoutMs: 3 * MINUTE,
      abortTimeoutMs: 4 * MINUTE,
    });
    const inherits = handler('inherits');
    const manifest = { idempotencyRetentionMs: 5 * HOUR, journalRetentionMs: 6 * HOUR, abortTimeoutMs: 7 * MINUTE };
    const patched = { idempotencyRetentionMs: 8 * HOUR, inactivityTimeoutMs: 9 * MINUTE };
    const svc = service({ handlers: [own, inherits], ...manifest }, patched);

    expect(effectiveHandlerSettings(svc, own, DEFAULTS)).toMatchObject({
      idempotencyRetentionMs: 1 * HOUR,
      journalRetentionMs: 2 * HOUR,
      inactivityTimeoutMs: 3 * MINUTE,
      abortTimeoutMs: 4 * MINUTE,
    });
    expect(effectiveHandlerSettings(svc, inherits, DEFAULTS)).toMatchObject({
      idempotencyRetentionMs: 8 * HOUR,
      journalRetentionMs: 6 * HOUR,
      inactivityTimeoutMs: 9 * MINUTE,
      abortTimeoutMs: 7 * MINUTE,
    });
    // The service as a whole: its handlers' own values take no part.
    expect(effectiveHandlerSettings(svc, undefined, DEFAULTS)).toMatchObject({
      idempotencyRetentionMs: 8 * HOUR,
      journalRetentionMs: 6 * HOUR,
      inactivityTimeoutMs: 9 * MINUTE,
      abortTimeoutMs: 7 * MINUTE,
    });
  });

  it('resolves the retry policy field by field, and lazy state, from the manifest only', () => {
    const h = handler('h', { retryPolicy: { maxAttempts: 2 }, enableLazyState: false });
    const svc = service({
      handlers: [h],
      retryPolicy: { maxAttempts: 5, initialIntervalMs: 100, onMaxAttempts: 'Kill' },
      enableLazyState: true,
    });
    expect(effectiveHandlerSettings(svc, h, DEFAULTS)).toMatchObject({
      retryPolicy: {
        initialIntervalMs: 100,
        exponentiationFactor: 2,
        maxAttempts: 2,
        maxIntervalMs: MINUTE,
        onMaxAttempts: 'Kill',
      },
      enableLazyState: false,
    });
    expect(effectiveHandlerSettings(svc, undefined, DEFAULTS)).toMatchObject({
      retryPolicy: { maxAttempts: 5 },
      enableLazyState: true,
    });
  });

  it('caps any journal retention at the server maximum and says so', () => {
    const h = handler('h', { journalRetentionMs: 30 * DAY });
    const svc = service({ handlers: [h, handler('other')], journalRetentionMs: 3 * DAY });
    const limits = { ...DEFAULTS, maxJournalRetentionMs: 7 * DAY };
    expect(effectiveHandlerSettings(svc, h, limits)).toMatchObject({
      journalRetentionMs: 7 * DAY,
      journalRetentionClamped: true,
    });
    expect(effectiveHandlerSettings(svc, undefined, limits)).toMatchObject({
      journalRetentionMs: 3 * DAY,
      journalRetentionClamped: false,
    });
  });

  it("gives a workflow one completion retention: the SDK's, then the admin API's, then the default", () => {
    const run = handler('run', { ty: 'Workflow', workflowCompletionRetentionMs: 3 * DAY });
    const status = handler('status', { ty: 'Shared' });
    const fromSdk = service({ ty: 'Workflow', handlers: [run, status], workflowCompletionRetentionMs: 3 * DAY });
    for (const h of [run, status, undefined]) {
      expect(
        effectiveHandlerSettings({ ...fromSdk, overrides: { workflowCompletionRetentionMs: 2 * DAY } }, h, DEFAULTS)
          .workflowCompletionRetentionMs,
      ).toBe(3 * DAY);
    }
    const plainRun = handler('run', { ty: 'Workflow' });
    const patched = service({ ty: 'Workflow', handlers: [plainRun] }, { workflowCompletionRetentionMs: 2 * DAY });
    expect(effectiveHandlerSettings(patched, plainRun, DEFAULTS).workflowCompletionRetentionMs).toBe(2 * DAY);
    expect(
      effectiveHandlerSettings(service({ ty: 'Workflow', handlers: [plainRun] }), plainRun, DEFAULTS),
    ).toMatchObject({ workflowCompletionRetentionMs: DAY });
  });

  it("makes a handler public by its own ingressPrivate, else by the service's visibility", () => {
    const open = handler('open', { ingressPrivate: false });
    const hidden = handler('hidden', { ingressPrivate: true });
    const plain = handler('plain');
    const svc = service({ handlers: [open, hidden, plain] });
    const madePrivate = { ...svc, overrides: { public: false } };
    expect([open, hidden, plain].map((h) => effectiveHandlerSettings(svc, h, DEFAULTS).public)).toEqual([
      true,
      false,
      true,
    ]);
    expect([open, hidden, plain].map((h) => effectiveHandlerSettings(madePrivate, h, DEFAULTS).public)).toEqual([
      true,
      false,
      false,
    ]);
    const privateInManifest = service({ handlers: [plain], ingressPrivate: true });
    expect(effectiveHandlerSettings(privateInManifest, plain, DEFAULTS).public).toBe(false);
    expect(
      effectiveHandlerSettings({ ...privateInManifest, overrides: { public: true } }, plain, DEFAULTS).public,
    ).toBe(true);
  });
});

describe('invocationRetention', () => {
  const settings = { idempotencyRetentionMs: 2 * DAY, workflowCompletionRetentionMs: 3 * DAY, journalRetentionMs: DAY };

  it('keeps a workflow run and an idempotent call for their completion retention, the journal no longer', () => {
    expect(invocationRetention(settings, { workflowRun: true, idempotencyKey: false })).toEqual({
      completionRetentionMs: 3 * DAY,
      journalRetentionMs: DAY,
    });
    expect(invocationRetention(settings, { workflowRun: false, idempotencyKey: true })).toEqual({
      completionRetentionMs: 2 * DAY,
      journalRetentionMs: DAY,
    });
    expect(
      invocationRetention({ ...settings, journalRetentionMs: 5 * DAY }, { workflowRun: false, idempotencyKey: true }),
    ).toEqual({ completionRetentionMs: 2 * DAY, journalRetentionMs: 2 * DAY });
  });

  it('keeps any other invocation exactly as long as its journal', () => {
    expect(invocationRetention(settings, { workflowRun: false, idempotencyKey: false })).toEqual({
      completionRetentionMs: DAY,
      journalRetentionMs: DAY,
    });
    expect(
      invocationRetention({ ...settings, journalRetentionMs: 0 }, { workflowRun: false, idempotencyKey: false }),
    ).toEqual({ completionRetentionMs: 0, journalRetentionMs: 0 });
  });
});
