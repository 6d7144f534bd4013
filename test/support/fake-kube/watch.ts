import type { ServerResponse } from 'node:http';
import { KubeError, gone } from './errors.ts';
import { resourceKey } from './registry.ts';
import type { Selector } from './selectors.ts';
import type { Store } from './store.ts';
import { toTable, type IncludeObject } from './tables.ts';
import { apiVersionOf, type ChangeEvent, type JsonObject, type KubeObject, type ResourceInfo } from './types.ts';

/**
 * Watch streams: newline-delimited `{type, object}` frames, replayed from a resourceVersion out of the store's bounded
 * history (410 Gone as a single ERROR event when it is too old, as the real server answers), then live. Selector
 * transitions become ADDED/DELETED as upstream. Headers are flushed before the first event because node-fetch (in
 * client-node 1.x) resolves the response only once they arrive.
 */

export interface WatchRequest {
  readonly resource: ResourceInfo;
  readonly version: string;
  readonly namespace: string | undefined;
  readonly selector: Selector;
  readonly resourceVersion: string | undefined;
  readonly allowBookmarks: boolean;
  readonly sendInitialEvents: boolean;
  readonly timeoutSeconds: number | undefined;
  readonly table: { readonly includeObject: IncludeObject } | undefined;
}

interface ActiveWatch {
  readonly resource: ResourceInfo;
  readonly close: (abrupt: boolean) => void;
}

export function asVersion(object: KubeObject, resource: ResourceInfo, version: string): KubeObject {
  return { ...object, apiVersion: apiVersionOf(resource.group, version) };
}

export class WatchHub {
  private readonly active = new Set<ActiveWatch>();
  /** Resource keys whose next watch answers 410 Gone. */
  private readonly expireNext = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly bookmarkIntervalMs: number,
  ) {}

  get openWatches(): number {
    return this.active.size;
  }

  expireNextWatch(resource: ResourceInfo): void {
    this.expireNext.add(resourceKey(resource));
  }

  /** Ends matching open watches; `abrupt` destroys the socket instead of ending the stream cleanly. */
  disconnect(filter: (resource: ResourceInfo) => boolean, abrupt: boolean): number {
    let count = 0;
    for (const watch of [...this.active]) {
      if (!filter(watch.resource)) continue;
      watch.close(abrupt);
      count++;
    }
    return count;
  }

  serve(request: WatchRequest, response: ServerResponse): void {
    const { resource, version } = request;
    const start = this.startingPoint(request);
    response.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
    response.flushHeaders();
    let first = true;
    const send = (type: string, object: KubeObject | JsonObject): void => {
      const payload =
        request.table !== undefined && (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED')
          ? toTable(resource, version, [object as KubeObject], {
              includeObject: request.table.includeObject,
              resourceVersion: String((object as KubeObject).metadata.resourceVersion ?? ''),
              withColumns: first,
            })
          : object;
      if (payload !== object) first = false;
      response.write(`${JSON.stringify({ type, object: payload })}\n`);
    };
    if (start instanceof KubeError) {
      send('ERROR', start.toStatus());
      response.end();
      return;
    }

    const inScope = (object: KubeObject | undefined): boolean =>
      object !== undefined &&
      (request.namespace === undefined || object.metadata.namespace === request.namespace) &&
      request.selector(object);
    const deliver = (event: ChangeEvent): void => {
      if (resourceKey(event.resource) !== resourceKey(resource)) return;
      const now = inScope(event.object);
      const before = event.type === 'MODIFIED' && inScope(event.oldObject);
      const object = asVersion(event.object, resource, version);
      if (event.type === 'MODIFIED') {
        if (now && before) send('MODIFIED', object);
        else if (now) send('ADDED', object);
        else if (before) send('DELETED', object);
      } else if (now) {
        send(event.type, object);
      }
    };

    // Replay and subscription happen in one synchronous step, so no change can fall between them.
    if (start === 'initial') {
      for (const object of this.store.list(resource, request.namespace)) {
        if (request.selector(object)) send('ADDED', asVersion(object, resource, version));
      }
      if (request.sendInitialEvents && request.allowBookmarks) {
        send('BOOKMARK', this.bookmark(resource, version, { 'k8s.io/initial-events-end': 'true' }));
      }
    } else {
      for (const event of start) deliver(event);
    }
    const unsubscribe = this.store.subscribe(deliver);
    const timers: NodeJS.Timeout[] = [];
    if (request.allowBookmarks) {
      timers.push(setInterval(() => send('BOOKMARK', this.bookmark(resource, version)), this.bookmarkIntervalMs));
    }
    if (request.timeoutSeconds !== undefined)
      timers.push(setTimeout(() => watch.close(false), request.timeoutSeconds * 1000));
    const cleanup = (): void => {
      unsubscribe();
      for (const t of timers) clearTimeout(t);
      this.active.delete(watch);
    };
    const watch: ActiveWatch = {
      resource,
      close: (abrupt) => {
        cleanup();
        if (abrupt) response.destroy();
        else response.end();
      },
    };
    this.active.add(watch);
    response.on('close', cleanup);
  }

  /** 'initial' for a watch that starts with the current state, or the changes to replay, or a 410 error. */
  private startingPoint(request: WatchRequest): 'initial' | ChangeEvent[] | KubeError {
    if (this.expireNext.delete(resourceKey(request.resource))) {
      return gone(`too old resource version: ${request.resourceVersion ?? '0'} (${this.store.resourceVersion})`);
    }
    const rv = request.resourceVersion;
    if (request.sendInitialEvents || rv === undefined || rv === '' || rv === '0') return 'initial';
    const changes = this.store.changesSince(Number(rv));
    return changes ?? gone(`too old resource version: ${rv} (${this.store.resourceVersion})`);
  }

  private bookmark(resource: ResourceInfo, version: string, annotations?: Record<string, string>): JsonObject {
    return {
      kind: resource.kind,
      apiVersion: apiVersionOf(resource.group, version),
      metadata: {
        resourceVersion: String(this.store.resourceVersion),
        ...(annotations !== undefined ? { annotations } : {}),
      },
    };
  }
}
