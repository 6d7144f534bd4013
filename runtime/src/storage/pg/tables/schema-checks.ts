import { MetadataUnreadableError } from '../../../schema/errors.ts';

/**
 * Checks of schema rows as they are read back (`ratchet.deployment`, `ratchet.service_revision`): Ratchet wrote them,
 * so a row that does not have their shape was damaged or edited by hand. Serving it would invoke the wrong endpoint
 * or crash later in a stranger place; it is refused with META0005 naming the row and what is wrong with it.
 */

const PROTOCOL_TYPES = new Set(['BidiStream', 'RequestResponse']);
const SERVICE_TYPES = new Set(['Service', 'VirtualObject', 'Workflow']);

function unreadable(row: string, problem: string): MetadataUnreadableError {
  return new MetadataUnreadableError(
    `the stored metadata cannot be read: ${row}: ${problem}. The row was damaged or edited by hand; restore the ` +
      'schema tables from a backup, or delete the deployment through the admin API and register it again',
  );
}

function isStringMap(v: unknown): boolean {
  return (
    typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string')
  );
}

export interface CheckedDeploymentRow {
  id: unknown;
  uri: unknown;
  arn: unknown;
  protocol_type: unknown;
  additional_headers: unknown;
  metadata: unknown;
  min_protocol_version: unknown;
  max_protocol_version: unknown;
  services: unknown;
}

export function checkDeploymentRow(row: CheckedDeploymentRow): void {
  const name = `deployment ${String(row.id)} (ratchet.deployment)`;
  if (typeof row.uri !== 'string' && typeof row.arn !== 'string')
    throw unreadable(name, 'it has neither a uri nor an arn');
  if (!PROTOCOL_TYPES.has(String(row.protocol_type))) {
    throw unreadable(name, `protocol_type is ${JSON.stringify(row.protocol_type)}, not BidiStream or RequestResponse`);
  }
  const min = row.min_protocol_version;
  const max = row.max_protocol_version;
  if (!Number.isInteger(min) || !Number.isInteger(max) || (min as number) > (max as number)) {
    throw unreadable(name, `the protocol versions ${String(min)}..${String(max)} are not a range`);
  }
  if (!isStringMap(row.additional_headers)) throw unreadable(name, 'additional_headers is not a map of strings');
  if (!isStringMap(row.metadata)) throw unreadable(name, 'metadata is not a map of strings');
  const services = row.services;
  if (
    !Array.isArray(services) ||
    !services.every(
      (s) =>
        typeof s === 'object' &&
        s !== null &&
        typeof (s as { name?: unknown }).name === 'string' &&
        Number.isInteger((s as { revision?: unknown }).revision),
    )
  ) {
    throw unreadable(name, `services is ${JSON.stringify(services)?.slice(0, 200)}, not a list of {name, revision}`);
  }
}

/** A stored service revision's schema (the manifest part Ratchet keeps). */
export function checkRevisionRow(name: string, revision: number, schema: unknown): void {
  const row = `revision ${revision} of service ${name} (ratchet.service_revision)`;
  if (typeof schema !== 'object' || schema === null) throw unreadable(row, 'its metadata is not an object');
  const s = schema as { name?: unknown; ty?: unknown; handlers?: unknown };
  if (s.name !== name) throw unreadable(row, `its metadata names the service ${JSON.stringify(s.name)}`);
  if (!SERVICE_TYPES.has(String(s.ty))) throw unreadable(row, `the service type is ${JSON.stringify(s.ty)}`);
  if (
    !Array.isArray(s.handlers) ||
    !s.handlers.every(
      (h) =>
        typeof h === 'object' &&
        h !== null &&
        typeof (h as { name?: unknown }).name === 'string' &&
        typeof (h as { input?: unknown }).input === 'object' &&
        typeof (h as { output?: unknown }).output === 'object',
    )
  ) {
    throw unreadable(row, 'handlers is not a list of handlers with a name, input and output');
  }
}
