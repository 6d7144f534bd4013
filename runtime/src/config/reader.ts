import { TomlDate } from 'smol-toml';
import { ConfigError } from '../errors/config-errors.ts';
import { parseBindAddress, type BindAddress } from './bind-address.ts';
import { closest } from './did-you-mean.ts';
import { CONFIG_FILE_ENV, SETTINGS, type SettingName } from './settings.ts';
import { formatDuration, parseDuration, parseSize, UnitFormatError } from './units.ts';

/*
 * Reading one setting: from the environment or the config file (environment first), turned into a typed value or
 * into RT0002 naming the variable or file key.
 */

/** A raw value and the name to blame for it: the env var, or the file key and file. */
export interface Raw {
  readonly value: unknown;
  readonly key: string;
  readonly fromEnv: boolean;
}

export class Sources {
  constructor(
    private readonly env: Readonly<Record<string, string | undefined>>,
    private readonly file: ReadonlyMap<string, unknown>,
    private readonly filePath: string | undefined,
  ) {}

  get(name: SettingName): Raw | undefined {
    const fromEnv = this.env[name];
    // An empty variable counts as unset: `RATCHET_X=${X:-}` in compose files and charts must not break defaults.
    if (fromEnv !== undefined && fromEnv.trim() !== '') return { value: fromEnv, key: name, fromEnv: true };
    const fileKey = SETTINGS[name];
    if (this.file.has(fileKey))
      return { value: this.file.get(fileKey), key: `${fileKey} in ${this.filePath ?? 'config file'}`, fromEnv: false };
    return undefined;
  }
}

export function describe(value: unknown): string {
  if (typeof value === 'string') return `'${value}'`;
  if (value instanceof TomlDate) return `the date ${value.toISOString()}`;
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object' && value !== null) return 'a table';
  return String(value);
}

export function invalid(raw: Raw, problem: string, cause?: unknown): ConfigError {
  return ConfigError.invalidValue(raw.key, problem, cause === undefined ? {} : { cause });
}

/** Runs a unit parser on a string value, turning its message into RT0002 naming the key. */
function viaUnit<T>(raw: Raw, what: string, parse: (text: string) => T): T {
  if (typeof raw.value !== 'string') throw invalid(raw, `expected ${what} as a string, got ${describe(raw.value)}`);
  try {
    return parse(raw.value);
  } catch (error) {
    if (error instanceof UnitFormatError) throw invalid(raw, error.message, error);
    throw error;
  }
}

interface Bounds {
  readonly min?: number;
  readonly max?: number;
}

function checkBounds(raw: Raw, value: number, bounds: Bounds, render: (n: number) => string = String): number {
  if (bounds.min !== undefined && value < bounds.min)
    throw invalid(raw, `must be at least ${render(bounds.min)}, got ${describe(raw.value)}`);
  if (bounds.max !== undefined && value > bounds.max)
    throw invalid(raw, `must be at most ${render(bounds.max)}, got ${describe(raw.value)}`);
  return value;
}

function toNumber(raw: Raw, integer: boolean): number {
  const what = integer ? 'a whole number' : 'a number';
  let value: number;
  if (typeof raw.value === 'number') value = raw.value;
  else if (typeof raw.value === 'bigint') value = Number(raw.value);
  else if (typeof raw.value === 'string' && /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/.test(raw.value))
    value = Number(raw.value);
  else throw invalid(raw, `expected ${what}, got ${describe(raw.value)}`);
  if (!Number.isFinite(value) || (integer && !Number.isSafeInteger(value)))
    throw invalid(raw, `expected ${what}, got ${describe(raw.value)}`);
  return value;
}

export function stringOf(raw: Raw, what: string): string {
  if (typeof raw.value !== 'string') throw invalid(raw, `expected ${what}, got ${describe(raw.value)}`);
  return raw.value.trim();
}

function oneOf<T extends string>(raw: Raw, allowed: readonly T[]): T {
  const text = stringOf(raw, `one of ${allowed.join(', ')}`).toLowerCase();
  const found = allowed.find((candidate) => candidate === text);
  if (found === undefined) throw invalid(raw, `expected one of ${allowed.join(', ')}, got ${describe(raw.value)}`);
  return found;
}

export function redactUrl(url: URL): string {
  const copy = new URL(url.href);
  if (copy.password !== '') copy.password = '***';
  return copy.href;
}

export class Reader {
  constructor(private readonly sources: Sources) {}

  raw(name: SettingName): Raw | undefined {
    return this.sources.get(name);
  }

  string(name: SettingName, fallback: string, check: (raw: Raw, value: string) => void): string {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const value = stringOf(raw, 'a string');
    check(raw, value);
    return value;
  }

  integer(name: SettingName, fallback: number, bounds: Bounds): number {
    const raw = this.raw(name);
    return raw === undefined ? fallback : checkBounds(raw, toNumber(raw, true), bounds);
  }

  number(name: SettingName, fallback: number, bounds: Bounds): number {
    const raw = this.raw(name);
    return raw === undefined ? fallback : checkBounds(raw, toNumber(raw, false), bounds);
  }

  duration(name: SettingName, fallback: string, bounds: Bounds = { min: 0 }): number {
    const value = this.optionalDuration(name, bounds);
    return value ?? parseDuration(fallback);
  }

  optionalDuration(name: SettingName, bounds: Bounds = { min: 0 }): number | undefined {
    const raw = this.raw(name);
    if (raw === undefined) return undefined;
    return checkBounds(
      raw,
      viaUnit(raw, "a duration such as '500ms', '1m 30s', '1d' or 'PT1M'", parseDuration),
      bounds,
      formatDuration,
    );
  }

  size(name: SettingName, fallback: string, bounds: Bounds): number {
    const raw = this.raw(name);
    if (raw === undefined) return parseSize(fallback);
    // TOML integers are plain bytes; strings go through the size parser (which also takes plain numbers).
    const bytes =
      typeof raw.value === 'number' || typeof raw.value === 'bigint'
        ? toNumber(raw, true)
        : viaUnit(raw, "a size such as '32 MiB'", parseSize);
    return checkBounds(raw, bytes, bounds, (n) => `${n} bytes`);
  }

  bind(name: SettingName, fallback: BindAddress): BindAddress {
    const raw = this.raw(name);
    return raw === undefined ? fallback : viaUnit(raw, "an address such as '127.0.0.1:8080'", parseBindAddress);
  }

  oneOf<T extends string>(name: SettingName, allowed: readonly T[], fallback: T): T {
    const raw = this.raw(name);
    return raw === undefined ? fallback : oneOf(raw, allowed);
  }

  /** A TOML boolean, or `true` / `false` as text (environment variables). */
  boolean(name: SettingName, fallback: boolean): boolean {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    if (typeof raw.value === 'boolean') return raw.value;
    return oneOf(raw, ['true', 'false'] as const) === 'true';
  }
}

export function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof TomlDate);
}

export function unknownEnvWarnings(env: Readonly<Record<string, string | undefined>>): string[] {
  const known = Object.keys(SETTINGS);
  return Object.keys(env)
    .filter((name) => name.startsWith('RATCHET_') && name !== CONFIG_FILE_ENV && !(name in SETTINGS))
    .sort()
    .map((name) => {
      const hint = closest(name, known);
      return `unknown environment variable ${name} is ignored${hint === undefined ? '' : ` (did you mean ${hint}?)`}`;
    });
}
