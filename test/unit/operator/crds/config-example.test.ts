import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ClusterSpec } from '../../../../operator/src/api/v1alpha1/cluster.ts';
import { renderRuntimeConfig } from '../../../../operator/src/specs/config-map.ts';
import { loadConfig } from '../../../../runtime/src/config/config.ts';

/**
 * The example in the Cluster CRD's `spec.config` description is what users copy: rendered as the operator renders
 * it, the runtime's own configuration loader must accept it (a key it refuses would crash-loop every pod).
 */
describe("the Cluster CRD's spec.config example", () => {
  it('is accepted by the runtime configuration loader', async () => {
    const description = String((ClusterSpec.properties.config as { description?: string }).description);
    const json = /e\.g\. (\{.*\}\})/.exec(description)?.[1];
    expect(json, description).toBeDefined();
    const example = JSON.parse(json!) as Record<string, unknown>;
    const dir = await mkdtemp(join(tmpdir(), 'ratchet-config-example-'));
    try {
      const file = join(dir, 'ratchet.toml');
      await writeFile(file, renderRuntimeConfig(example));
      const config = loadConfig({ env: {}, configFile: file });
      expect(config.invoker.inactivityTimeoutMs).toBe(120_000);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
