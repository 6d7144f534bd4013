import { readFileSync } from 'node:fs';
import { parse as parseToml, TomlError } from 'smol-toml';
import { ConfigError } from '../errors/config-errors.ts';
import { closest } from './did-you-mean.ts';
import { isTable } from './reader.ts';
import { SETTINGS } from './settings.ts';

/* The TOML config file, flattened to dotted keys (`section.name`) that must match `SETTINGS`' file keys. */

const FILE_KEYS: ReadonlySet<string> = new Set(Object.values(SETTINGS));

export function readConfigFile(path: string, blame: string): Map<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigError(`cannot read the config file ${path} (from ${blame}): ${reason}`, {
      key: blame,
      cause: error,
    });
  }
  let parsed: Record<string, unknown>;
  try {
    parsed = parseToml(text);
  } catch (error) {
    if (error instanceof TomlError) {
      throw new ConfigError(
        `the config file ${path} is not valid TOML (line ${error.line}, column ${error.column}): ${error.message}`,
        {
          key: blame,
          cause: error,
        },
      );
    }
    throw error;
  }
  const values = new Map<string, unknown>();
  flatten(parsed, '', values);
  // A mistyped key would otherwise be silently ignored, and the setting silently left at its default.
  for (const key of values.keys()) {
    if (!FILE_KEYS.has(key)) {
      const hint = closest(key, [...FILE_KEYS]);
      throw new ConfigError(
        `unknown key ${key} in the config file ${path}${hint === undefined ? '' : ` (did you mean ${hint}?)`}`,
        { key },
      );
    }
  }
  return values;
}

function flatten(table: Record<string, unknown>, prefix: string, into: Map<string, unknown>): void {
  for (const [key, value] of Object.entries(table)) {
    const path = prefix === '' ? key : `${prefix}.${key}`;
    if (isTable(value)) flatten(value, path, into);
    else into.set(path, value);
  }
}
