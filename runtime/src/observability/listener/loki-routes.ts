import type { LogSource } from '../model.ts';
import * as loki from '../loki/api.ts';
import { parseTailRequest, startTail } from '../loki/tail.ts';
import type { ApiRoute, StreamRoute } from './app.ts';

const now = (): bigint => BigInt(Date.now()) * 1_000_000n;

/** Loki's HTTP API (`/loki/api/v1/…`) over the cluster's log store, GET and POST as Loki serves them. */
export function lokiRoutes(source: LogSource): ApiRoute[] {
  const both = (url: string, handle: ApiRoute['handle']): ApiRoute[] => [
    { method: 'GET', url, handle },
    { method: 'POST', url, handle },
  ];
  return [
    ...both('/loki/api/v1/query', (r) => loki.query(source, r.params, now)),
    ...both('/loki/api/v1/query_range', (r) => loki.queryRange(source, r.params, now)),
    ...both('/loki/api/v1/labels', (r) => loki.labels(source, r.params, now)),
    ...both('/loki/api/v1/label/:name/values', (r) => loki.labelValues(source, r.path.name ?? '', r.params, now)),
    ...both('/loki/api/v1/series', (r) => loki.series(source, r.params, now)),
    ...both('/loki/api/v1/index/stats', (r) => loki.indexStats(source, r.params, now)),
    ...both('/loki/api/v1/index/volume', (r) => loki.indexVolume(source, r.params, now)),
    ...both('/loki/api/v1/index/volume_range', (r) => loki.indexVolumeRange(source, r.params, now)),
    { method: 'GET', url: '/loki/api/v1/status/buildinfo', handle: () => Promise.resolve(loki.buildInfo()) },
  ];
}

/** `GET /loki/api/v1/tail` over WebSocket (loki/tail.ts). */
export function lokiTailRoute(source: LogSource): StreamRoute {
  return {
    url: '/loki/api/v1/tail',
    open(r) {
      const req = parseTailRequest(r.params, now());
      return (send, fail) => startTail(source, req, now, (m) => send(JSON.stringify(m)), fail);
    },
  };
}
