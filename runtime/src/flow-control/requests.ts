import { JsonBodyShapeError } from '../admin/errors.ts';
import { parseRulePattern, PatternError, type RulePattern } from './pattern.ts';
import type { Precondition, RuleDelete, RuleUpsert } from './rule-book.ts';

/**
 * The bodies of `PUT /limits/rules` and `POST /limits/rules/bulk-delete`, read as restate reads them: an array of
 * entries; a bad entry refuses the whole batch with 422 naming the entry and field (`[1].pattern: …`). Unknown fields
 * are ignored, as restate ignores them.
 */

function shape(detail: string): JsonBodyShapeError {
  return new JsonBodyShapeError(detail);
}

function describeType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'sequence';
  if (typeof v === 'object') return 'map';
  if (typeof v === 'string') return `string ${JSON.stringify(v)}`;
  if (typeof v === 'number') return Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``;
  if (typeof v === 'boolean') return `boolean \`${v}\``;
  return typeof v;
}

function entries(body: unknown, struct: string): Record<string, unknown>[] {
  if (!Array.isArray(body)) throw shape(`invalid type: ${describeType(body)}, expected a sequence`);
  return body.map((e, i) => {
    if (typeof e !== 'object' || e === null || Array.isArray(e)) {
      throw shape(`[${i}]: invalid type: ${describeType(e)}, expected struct ${struct}`);
    }
    return e as Record<string, unknown>;
  });
}

function pattern(e: Record<string, unknown>, i: number): RulePattern {
  if (!('pattern' in e)) throw shape(`[${i}]: missing field \`pattern\``);
  if (typeof e.pattern !== 'string')
    throw shape(`[${i}].pattern: invalid type: ${describeType(e.pattern)}, expected a string`);
  try {
    return parseRulePattern(e.pattern);
  } catch (err) {
    if (err instanceof PatternError) throw shape(`[${i}].pattern: ${err.message}`);
    throw err;
  }
}

/** A nonzero u32, as restate's `NonZeroU32`. */
function nonZeroU32(v: unknown, where: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    throw shape(`${where}: invalid type: ${describeType(v)}, expected a nonzero u32`);
  }
  if (v < 1 || v > 0xffff_ffff) throw shape(`${where}: invalid value: integer \`${v}\`, expected a nonzero u32`);
  return v;
}

function u32(v: unknown, where: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v))
    throw shape(`${where}: invalid type: ${describeType(v)}, expected u32`);
  if (v < 0 || v > 0xffff_ffff) throw shape(`${where}: invalid value: integer \`${v}\`, expected u32`);
  return v;
}

function precondition(v: unknown, i: number): Precondition {
  if (v === undefined) return { type: 'none' };
  const where = `[${i}].precondition`;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw shape(`${where}: invalid type: ${describeType(v)}, expected internally tagged enum Precondition`);
  }
  const p = v as Record<string, unknown>;
  if (!('type' in p)) throw shape(`${where}: missing field \`type\``);
  switch (p.type) {
    case 'none':
      return { type: 'none' };
    case 'does_not_exist':
      return { type: 'does_not_exist' };
    case 'matches':
      if (!('version' in p)) throw shape(`${where}: missing field \`version\``);
      return { type: 'matches', version: u32(p.version, `${where}.version`) };
    default:
      if (typeof p.type !== 'string') {
        throw shape(`${where}.type: invalid type: ${describeType(p.type)}, expected variant identifier`);
      }
      throw shape(
        `${where}.type: unknown variant \`${p.type}\`, expected one of \`none\`, \`matches\`, \`does_not_exist\``,
      );
  }
}

export function parseUpsertRules(body: unknown): RuleUpsert[] {
  return entries(body, 'UpsertRuleRequest').map((e, i) => {
    const p = pattern(e, i);
    let concurrency: number | undefined;
    if (e.limits !== undefined && e.limits !== null) {
      if (typeof e.limits !== 'object' || Array.isArray(e.limits)) {
        throw shape(`[${i}].limits: invalid type: ${describeType(e.limits)}, expected struct UserLimits`);
      }
      const c = (e.limits as Record<string, unknown>).concurrency;
      if (c !== undefined && c !== null) concurrency = nonZeroU32(c, `[${i}].limits.concurrency`);
    }
    let description: string | undefined;
    if (e.description !== undefined && e.description !== null) {
      if (typeof e.description !== 'string') {
        throw shape(`[${i}].description: invalid type: ${describeType(e.description)}, expected a string`);
      }
      description = e.description;
    }
    let disabled = false;
    if (e.disabled !== undefined) {
      if (typeof e.disabled !== 'boolean') {
        throw shape(`[${i}].disabled: invalid type: ${describeType(e.disabled)}, expected a boolean`);
      }
      disabled = e.disabled;
    }
    return { pattern: p, concurrency, description, disabled, precondition: precondition(e.precondition, i) };
  });
}

export function parseDeleteRules(body: unknown): RuleDelete[] {
  return entries(body, 'DeleteRuleRequest').map((e, i) => ({
    pattern: pattern(e, i),
    expectedVersion:
      e.expected_version === undefined || e.expected_version === null
        ? undefined
        : u32(e.expected_version, `[${i}].expected_version`),
  }));
}
