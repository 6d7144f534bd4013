import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatedFiles } from './generated-files.ts';

/*
 * `npm run gen:crds`: writes the CRDs (crds/, the CRD chart's templates) and the RBAC rules (the operator chart's
 * _rules.tpl, operator/deploy/rbac.yaml) from the TypeScript sources. `--check` only reports drift (exit 1).
 */

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const check = process.argv.includes('--check');

let stale = 0;
for (const [path, content] of generatedFiles()) {
  const file = join(root, path);
  const current = await readFile(file, 'utf8').catch(() => undefined);
  if (current === content) continue;
  stale += 1;
  if (check) {
    process.stderr.write(`out of date: ${path}\n`);
    continue;
  }
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, content);
  process.stdout.write(`wrote ${path}\n`);
}

if (check && stale > 0) {
  process.stderr.write('run `npm run gen:crds` and commit the result\n');
  process.exit(1);
}
if (!check && stale === 0) process.stdout.write('generated files are up to date\n');
