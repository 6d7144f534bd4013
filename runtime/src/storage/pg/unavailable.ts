/**
 * The database could not be reached or went away: connection refused or reset, the server shutting down or starting
 * up (SQLSTATE classes 08 and 57P), a connection that ended, or a commit whose outcome is unknown because of it. Such
 * failures are expected while PostgreSQL restarts; callers log them as warnings, not errors.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (/^(08|57P)/.test(code) || /^E(CONNREFUSED|CONNRESET|NOENT|PIPE|TIMEDOUT|HOSTUNREACH)$/.test(code)) return true;
  }
  if (err.name === 'CommitOutcomeUnknownError') return true;
  return /Connection terminated|connection .*(lost|closed)|not queryable|timeout exceeded when trying to connect/i.test(
    err.message,
  );
}
