#!/usr/bin/env node
// Reads a vitest JSON report and prints the failures, `N skipped` when there are any, then exactly one final line:
// `N passed, N failed`. Exits non-zero when a test failed, a file failed to run, no test ran, the
// report is missing, or vitest itself exited non-zero (`--vitest-exit <code>`).
//
// usage: node test/support/summarize.mjs <report.json> [--vitest-exit <code>]
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const args = process.argv.slice(2);
const reportPath = args[0];
const exitFlag = args.indexOf('--vitest-exit');
const vitestExit = exitFlag >= 0 ? Number(args[exitFlag + 1]) : 0;

const problems = [];
let passed = 0;
let failed = 0;
let skipped = 0;

let report;
try {
  if (reportPath === undefined) throw new Error('no report path given');
  report = JSON.parse(readFileSync(reportPath, 'utf8'));
} catch (err) {
  problems.push(`vitest wrote no readable JSON report (${err instanceof Error ? err.message : String(err)})`);
}

if (report !== undefined) {
  passed = report.numPassedTests ?? 0;
  failed = report.numFailedTests ?? 0;
  skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);

  for (const file of report.testResults ?? []) {
    const name = relative(process.cwd(), file.name ?? '?');
    const failedTests = (file.assertionResults ?? []).filter((t) => t.status === 'failed');
    for (const test of failedTests) {
      const firstLine = String(test.failureMessages?.[0] ?? '').split('\n')[0];
      console.log(`FAIL ${name} > ${test.fullName ?? test.title}: ${firstLine}`);
    }
    // A file that fails to import, or whose hooks throw, has no failed tests of its own but did not pass.
    if (file.status === 'failed' && failedTests.length === 0) {
      problems.push(`${name} failed to run: ${String(file.message ?? '').split('\n')[0]}`);
    }
  }
  if (passed + failed === 0) problems.push('no test ran');
  if (report.success === false && failed === 0 && problems.length === 0) problems.push('vitest reported failure');
}

if (Number.isNaN(vitestExit) || vitestExit !== 0) problems.push(`vitest exited with ${String(args[exitFlag + 1])}`);

for (const problem of problems) console.log(`ERROR ${problem}`);
// Skipped tests (e.g. the kind run where Docker is missing) are reported on their own line, so the last line is
// exactly `N passed, N failed`.
if (skipped > 0) console.log(`${skipped} skipped`);
console.log(`${passed} passed, ${failed} failed`);
process.exitCode = failed > 0 || problems.length > 0 ? 1 : 0;
