/** A stream's identity: its labels in name order. */
export function streamKey(labels: Readonly<Record<string, string>>): string {
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * The stream labels every line carries. `service_name` is the Restate service of an invocation-scoped line and
 * `ratchet` for the runtime's own lines (Loki's convention: the service that logged); `component` the part of the
 * runtime (engine, ingress, admin, …); `node` and `cluster` where it ran.
 */
export const STREAM_LABELS = ['service_name', 'level', 'component', 'node', 'cluster'] as const;

/** The `service_name` of the runtime's own lines. */
export const RUNTIME_SERVICE_NAME = 'ratchet';
