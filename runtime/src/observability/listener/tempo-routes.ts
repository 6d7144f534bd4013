import type { SpanSource } from '../model.ts';
import * as tempo from '../tempo/api.ts';
import type { ApiRoute, ApiRequest } from './app.ts';

const now = (): bigint => BigInt(Date.now()) * 1_000_000n;

function accept(r: ApiRequest): string | undefined {
  const a = r.headers.accept;
  return Array.isArray(a) ? a.join(', ') : a;
}

/** Tempo's HTTP API (`/api/…`) over the cluster's span store. */
export function tempoRoutes(source: SpanSource): ApiRoute[] {
  const get = (url: string, handle: ApiRoute['handle']): ApiRoute => ({ method: 'GET', url, handle });
  return [
    get('/api/traces/:id', (r) => tempo.getTraceV1(source, r.params, now, r.path.id ?? '', accept(r))),
    get('/api/v2/traces/:id', (r) => tempo.getTraceV2(source, r.params, now, r.path.id ?? '', accept(r))),
    get('/api/search', (r) => tempo.search(source, r.params, now)),
    get('/api/search/tags', (r) => tempo.searchTags(source, r.params, now)),
    get('/api/v2/search/tags', (r) => tempo.searchTagsV2(source, r.params, now)),
    get('/api/search/tag/:tag/values', (r) => tempo.searchTagValues(source, r.params, now, r.path.tag ?? '')),
    get('/api/v2/search/tag/:tag/values', (r) => tempo.searchTagValuesV2(source, r.params, now, r.path.tag ?? '')),
    get('/api/echo', (r) => tempo.echo(source, r.params, now)),
    get('/api/status/buildinfo', (r) => tempo.buildInfo(source, r.params, now)),
  ];
}
