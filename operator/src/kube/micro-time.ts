/** Kubernetes MicroTime (Lease times, Event times): RFC 3339 in UTC with exactly six fractional digits. */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
