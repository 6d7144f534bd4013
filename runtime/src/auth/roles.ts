/**
 * The roles an access token may carry (its `role` claim) and what each opens. The operator mints tokens with these
 * names; they are part of the contract in `README.md` beside this file.
 */
export const ROLES = ['full', 'admin', 'ingress', 'awakeables', 'observability'] as const;
export type Role = (typeof ROLES)[number];

/**
 * What a request asks for:
 * - `admin`: anything on the admin listener (9070), `POST /query` included;
 * - `ingress`: anything on the ingress listener (8080);
 * - `awakeable-completion`: `POST /restate/awakeables/{id}/resolve|reject` (and `/restate/a/…`) on the ingress;
 * - `introspection`: a SQL session on 9071;
 * - `observability`: the log and trace queries on 3100 (Loki and Tempo API).
 */
export type Access = 'admin' | 'ingress' | 'awakeable-completion' | 'introspection' | 'observability';

const GRANTS: Readonly<Record<Role, ReadonlySet<Access>>> = {
  full: new Set<Access>(['admin', 'ingress', 'awakeable-completion', 'introspection', 'observability']),
  admin: new Set<Access>(['admin', 'introspection', 'observability']),
  ingress: new Set<Access>(['ingress', 'awakeable-completion']),
  awakeables: new Set<Access>(['awakeable-completion']),
  // Reads this listener only: for Grafana, logcli and a log agent's dashboards.
  observability: new Set<Access>(['observability']),
};

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

export function roleAllows(role: Role, access: Access): boolean {
  return GRANTS[role].has(access);
}

/** Who a verified token speaks for. */
export interface Principal {
  readonly role: Role;
  /** The token's `sub` claim, for logs; tokens need not have one. */
  readonly subject: string | undefined;
}
