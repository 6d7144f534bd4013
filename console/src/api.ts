/**
 * The admin API as the console uses it: same origin (the console is served by the admin listener), JSON, and in
 * managed mode the access token as a bearer header. The token lives in this tab's session storage only: gone when the
 * tab closes, never written anywhere else.
 */

const TOKEN_KEY = 'ratchet.console.token';

export function token(): string | undefined {
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

export function setToken(value: string | undefined): void {
  if (value === undefined || value === '') sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, value);
}

/** A refusal of the admin API: its status and the message it gave (shown to the user as is). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Called when the API answers 401: the console shows its login. */
let onUnauthorized: () => void = () => undefined;
export function whenUnauthorized(f: () => void): void {
  onUnauthorized = f;
}

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const t = token();
  if (t !== undefined) headers.authorization = `Bearer ${t}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await res.text();
  if (res.status === 401) onUnauthorized();
  if (!res.ok) {
    let message = text;
    try {
      const parsed = JSON.parse(text) as { message?: unknown };
      if (typeof parsed.message === 'string') message = parsed.message;
    } catch {
      // Plain text answers (restate's extractors) are the message.
    }
    throw new ApiError(res.status, message === '' ? `${res.status} ${res.statusText}` : message);
  }
  return (text === '' ? undefined : JSON.parse(text)) as T;
}

export type Row = Record<string, unknown>;

/** SQL over the introspection tables (`POST /query`). */
export async function query(sql: string): Promise<Row[]> {
  const res = await api<{ rows: Row[] }>('POST', '/query', { query: sql });
  return res.rows;
}

/** A string as an SQL literal. */
export function lit(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}
