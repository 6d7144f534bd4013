/** What one load-generator run measured (autocannon or wrk). */
export interface LoadStats {
  /** Responses with a 2xx status. */
  readonly ok: number;
  readonly non2xx: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
  readonly timeouts: number;
  /** From the first request to the end of the run, seconds. */
  readonly elapsedS: number;
  readonly rps: number;
  /**
   * Latencies, milliseconds: autocannon's of the 2xx responses, exact (not bucketed); wrk's from its histogram of all
   * responses (microsecond resolution).
   */
  readonly latencyMs: {
    readonly mean: number;
    readonly p50: number;
    readonly p90: number;
    readonly p99: number;
    readonly max: number;
  };
  /** Status codes other than 2xx, with counts: what to look at when `non2xx` is not 0. */
  readonly statusCodes: Record<string, number>;
}
