/** Errors of the storage that callers act on, whatever the database. */

export class FencingError extends Error {
  /**
   * A write refused because this process does not hold a partition it writes: it did not happen (the lease guard is the
   * transaction's first statement, so nothing after it committed), and sending the request to the owner is safe.
   * @param unsent refused by this process before anything was sent (the partition was given up or re-taken since the
   *   write was made), rather than by the lease guard in the database.
   */
  constructor(
    readonly partitions: readonly number[],
    readonly unsent = false,
  ) {
    super(
      unsent
        ? `partition(s) ${partitions.join(', ')} are not held by this process (given up or being recovered)`
        : `lost the lease of partition(s) ${partitions.join(', ')}; another process owns them now`,
    );
    this.name = 'FencingError';
  }
}
