import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildCrds } from '../../../../operator/src/api/v1alpha1/crd.ts';
import { KINDS } from '../../../../operator/src/api/v1alpha1/index.ts';
import {
  CRD_CHART_TEMPLATES,
  CRDS_DIR,
  generatedFiles,
} from '../../../../operator/scripts/generated-files.ts';
import { REPO_ROOT, readRepoFile, readYamlDocs } from './schema-tools.ts';

/*
 * The checked-in CRDs, chart CRD templates and RBAC rules are exactly what the generator writes from the TypeScript
 * schemas today. A failure here means someone changed a schema (or hand-edited a generated file) without regenerating.
 */

const FIX = 'run `npm run gen:crds` and commit the result';

describe('generated files', () => {
  const files = generatedFiles();

  it.each([...files.keys()])('%s matches the generator', (path) => {
    const onDisk = existsSync(join(REPO_ROOT, path)) ? readRepoFile(path) : undefined;
    expect(onDisk, `${path} is missing: ${FIX}`).toBeDefined();
    // toBe on the whole text would print a 30 KB diff; name the first differing line instead.
    if (onDisk !== files.get(path)) {
      const expected = files.get(path)!.split('\n');
      const actual = onDisk!.split('\n');
      const line = expected.findIndex((l, i) => l !== actual[i]);
      expect.fail(
        `${path} is out of date (first difference at line ${line + 1}: expected ${JSON.stringify(expected[line])}, ` +
          `found ${JSON.stringify(actual[line])}): ${FIX}`,
      );
    }
  });

  it('leaves no stale CRD files behind (a kind that was removed or renamed)', () => {
    for (const dir of [CRDS_DIR, CRD_CHART_TEMPLATES]) {
      const stale = readdirSync(join(REPO_ROOT, dir))
        .filter((f) => f.endsWith('.yaml'))
        .map((f) => `${dir}/${f}`)
        .filter((p) => !files.has(p));
      expect(stale, `not produced by the generator: ${FIX} and delete them`).toEqual([]);
    }
  });

  it('is deterministic: two runs give the same bytes', () => {
    expect([...generatedFiles()]).toEqual([...files]);
  });

  it('writes one CRD per kind, and all.yaml holds all of them in KINDS order', () => {
    const all = readYamlDocs(files.get(`${CRDS_DIR}/all.yaml`)!);
    expect(all.map((d) => (d['metadata'] as { name: string }).name)).toEqual(
      Object.values(KINDS).map((k) => `${k.plural}.ratchet.dev`),
    );
    for (const kind of Object.values(KINDS)) {
      const [doc] = readYamlDocs(files.get(`${CRDS_DIR}/${kind.plural}.ratchet.dev.yaml`)!);
      expect(doc).toEqual(all.find((d) => (d['metadata'] as { name: string }).name === `${kind.plural}.ratchet.dev`));
    }
  });

  it('keeps every CRD far below the 256 KB annotation limit of client-side apply', () => {
    for (const [path, content] of files) {
      if (!path.endsWith('.ratchet.dev.yaml')) continue;
      // 64 KB leaves room for years of fields before Argo CD users need ServerSideApply.
      expect(Buffer.byteLength(content), path).toBeLessThan(64 * 1024);
    }
  });

  it('builds namespaced CRDs with one served storage version, a status subresource and the kind names', () => {
    for (const crd of buildCrds()) {
      const kind = Object.values(KINDS).find((k) => k.kind === crd.spec.names.kind)!;
      expect(crd.spec).toMatchObject({
        group: 'ratchet.dev',
        scope: 'Namespaced',
        names: {
          plural: kind.plural,
          singular: kind.singular,
          listKind: `${kind.kind}List`,
          shortNames: [...kind.shortNames],
          categories: [...kind.categories],
        },
      });
      expect(crd.spec.versions).toHaveLength(1);
      expect(crd.spec.versions[0]).toMatchObject({
        name: 'v1alpha1',
        served: true,
        storage: true,
        subresources: { status: {} },
      });
      const root = crd.spec.versions[0]!.schema.openAPIV3Schema;
      expect(root['required']).toEqual(['spec']);
      expect(Object.keys(root['properties'] as object)).toEqual(['apiVersion', 'kind', 'metadata', 'spec', 'status']);
      expect((root['properties'] as Record<string, unknown>)['metadata']).toEqual({ type: 'object' });
    }
  });

  it('carries no TypeBox internals into the YAML (symbols, $id, Kind markers)', () => {
    for (const [path, content] of files) {
      expect(content, path).not.toMatch(/\$id|\$schema|\[Kind\]|Symbol\(|TypeBox/);
    }
  });
});
