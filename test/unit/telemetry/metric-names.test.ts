import { describe, expect, it } from 'vitest';
import { createOperatorMetrics } from '../../../operator/src/telemetry/metrics.ts';
import { createMetrics } from '../../../runtime/src/telemetry/metrics.ts';

/** Every exported metric is `ratchet_…` (operator: `ratchet_operator_…`), with no doubled word in the prefix. */
describe('metric names', () => {
  it("the runtime's: ratchet_<component>_…, the process metrics without a doubled prefix", async () => {
    const text = await createMetrics().registry.metrics();
    const names = [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);
    expect(names).toContain('ratchet_process_cpu_seconds_total');
    expect(names).toContain('ratchet_nodejs_eventloop_lag_seconds');
    for (const name of names) {
      expect(name).toMatch(/^ratchet_[a-z]/);
      expect(name).not.toMatch(/^ratchet_(\w+?)_\1_/);
    }
  });

  it("the operator's: ratchet_operator_…", async () => {
    const text = await createOperatorMetrics({ processMetrics: true }).registry.metrics();
    const names = [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);
    expect(names).toContain('ratchet_operator_process_cpu_seconds_total');
    for (const name of names) expect(name).toMatch(/^ratchet_operator_[a-z]/);
    expect(names.some((n) => n.includes('process_process'))).toBe(false);
  });
});
