import { describe, expect, it } from 'vitest';
import {
  buildInfo,
  echo,
  searchTagValues,
  searchTagValuesV2,
  searchTags,
  searchTagsV2,
} from '../../../../runtime/src/observability/tempo/api.ts';
import { INV_A, INV_B, INV_C, T0, restateFixture } from '../../../support/observability/memory-span-source.ts';

const S = 1_000_000_000n;
const now = (): bigint => T0 + 60n * S;

describe('Tempo tag endpoints', () => {
  it('lists span and resource attribute names (v1) and every scope with intrinsics (v2)', async () => {
    const v1 = (await searchTags(restateFixture(), {}, now)).body as { tagNames: string[] };
    expect(v1.tagNames).toEqual(expect.arrayContaining(['restate.invocation.id', 'rpc.service', 'service.name']));
    expect(v1.tagNames).not.toContain('status');
    const intrinsic = (await searchTags(restateFixture(), { scope: 'intrinsic' }, now)).body as { tagNames: string[] };
    expect(intrinsic.tagNames).toEqual(expect.arrayContaining(['status', 'kind', 'rootServiceName', 'trace:id']));

    const v2 = (await searchTagsV2(restateFixture(), {}, now)).body as { scopes: { name: string; tags: string[] }[] };
    expect(v2.scopes.map((s) => s.name)).toEqual(['span', 'resource', 'event', 'link', 'intrinsic']);
    expect(v2.scopes.find((s) => s.name === 'resource')!.tags).toEqual([
      'service.instance.id',
      'service.name',
      'service.namespace',
      'service.version',
    ]);
    expect(v2.scopes.find((s) => s.name === 'event')!.tags).toEqual([
      'restate.journal.command.name',
      'restate.journal.command.type',
    ]);
    const spanOnly = (await searchTagsV2(restateFixture(), { scope: 'span', q: '{ kind = server }' }, now)).body;
    expect(spanOnly).toEqual({
      scopes: [{ name: 'span', tags: ['http.status_code', 'ratio', 'sampled', 'x y'] }],
      metrics: {},
    });
    await expect(searchTagsV2(restateFixture(), { scope: 'bogus' }, now)).rejects.toMatchObject({
      status: 400,
      message: 'invalid scope: bogus',
    });
  });

  it('lists the values of a tag (v1), the invocation-id aliases included', async () => {
    const values = async (tag: string) =>
      ((await searchTagValues(restateFixture(), {}, now, tag)).body as { tagValues: string[] }).tagValues;
    expect(await values('rpc.service')).toEqual(['Greeter', 'counter']);
    expect(await values('service.name')).toEqual(['Restate', 'greeter-svc']);
    expect(await values('service.invocation.id')).toEqual([INV_B, INV_A, INV_C].sort());
    expect(await values('http.status_code')).toEqual(['200']);
  });

  it('lists typed values of a scoped tag (v2), enum values for status and kind', async () => {
    const values = async (tag: string, q?: string) =>
      (
        (await searchTagValuesV2(restateFixture(), q === undefined ? {} : { q }, now, tag)).body as {
          tagValues: { type: string; value: string }[];
        }
      ).tagValues;
    expect(await values('resource.service.name')).toEqual([
      { type: 'string', value: 'Restate' },
      { type: 'string', value: 'greeter-svc' },
    ]);
    expect(await values('.rpc.service', '{ status = error }')).toEqual([
      { type: 'string', value: 'Greeter' },
      { type: 'string', value: 'counter' },
    ]);
    expect(await values('span.restate.invocation.id', `{ .rpc.service = "counter" }`)).toEqual([
      { type: 'string', value: INV_B },
    ]);
    expect(await values('span.http.status_code')).toEqual([{ type: 'int', value: '200' }]);
    expect(await values('.ratio')).toEqual([{ type: 'float', value: '0.5' }]);
    expect(await values('status')).toEqual([
      { type: 'keyword', value: 'error' },
      { type: 'keyword', value: 'ok' },
      { type: 'keyword', value: 'unset' },
    ]);
    expect((await values('span:kind')).map((v) => v.value)).toContain('internal');
    expect(await values('rootServiceName')).toEqual([
      { type: 'string', value: 'Restate' },
      { type: 'string', value: 'greeter-svc' },
    ]);
    // Grafana sends the editor's unfinished query: it filters nothing rather than failing.
    expect(await values('resource.service.name', '{ resource.service.name = }')).toHaveLength(2);
    await expect(searchTagValuesV2(restateFixture(), {}, now, 'service.name')).rejects.toMatchObject({
      status: 400,
      message: 'tag name is not valid intrinsic or scoped attribute: service.name',
    });
  });

  it('answers the health check and the build info', async () => {
    expect(await echo(restateFixture(), {}, now)).toMatchObject({ status: 200, body: 'echo' });
    const info = (await buildInfo(restateFixture(), {}, now)).body as Record<string, string>;
    expect(Object.keys(info).sort()).toEqual(['branch', 'buildDate', 'buildUser', 'goVersion', 'revision', 'version']);
    expect(info['version']).toMatch(/^2\.\d+\.\d+$/);
  });
});
