/**
 * Reading a time range of chunked rows (log lines, spans) up to a limit. A chunk holds many lines or spans, so
 * PostgreSQL cannot stop early along an index as it could with a row each: the range is read in slices from the end
 * the query starts at, each four times longer than the one before (a minute, four, sixteen …), until the limit is
 * reached. A query for the latest lines of a long range reads only its last minutes; one that finds few reads it all
 * in about log4(range / 1 min) queries.
 */

/** The first slice: a minute. */
const FIRST_SLICE_NS = 60_000_000_000n;

/** `fetch(from, to, limit)` returns at most `limit` items of [from, to), in the order of `direction`. */
export async function readInSlices<T>(
  startNs: bigint,
  endNs: bigint,
  direction: 'forward' | 'backward',
  limit: number,
  fetch: (fromNs: bigint, toNs: bigint, limit: number) => Promise<readonly T[]>,
): Promise<T[]> {
  const out: T[] = [];
  const forward = direction === 'forward';
  let span = FIRST_SLICE_NS;
  let done = forward ? startNs : endNs;
  while (out.length < limit && (forward ? done < endNs : done > startNs)) {
    const from = forward ? done : done - span > startNs ? done - span : startNs;
    const to = forward ? (done + span < endNs ? done + span : endNs) : done;
    for (const item of await fetch(from, to, limit - out.length)) out.push(item);
    done = forward ? to : from;
    span *= 4n;
  }
  return out;
}
