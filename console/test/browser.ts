import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';

/** Debian's chromium (`.ci/run` installs it when missing), driven headless by playwright-core. */
export function chromiumPath(): string {
  for (const p of ['/usr/bin/chromium', '/usr/bin/chromium-browser']) if (existsSync(p)) return p;
  throw new Error('chromium is not installed: apt-get install -y chromium (.ci/run does it)');
}

export function launch(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox', '--disable-gpu'], headless: true });
}

/** Screenshots of the console's pages, kept as test artefacts (and shown in the README). */
export const SCREENSHOTS: string = fileURLToPath(new URL('../../.test-data/console/', import.meta.url));
mkdirSync(SCREENSHOTS, { recursive: true });
