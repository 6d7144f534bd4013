import { execFileSync } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';

/**
 * CPU time and memory of process trees, read from Linux's /proc. The benchmark measures the runtimes from outside, the
 * same way for both: restate-server is one process; Ratchet is its Node process plus the embedded PostgreSQL (a
 * postmaster and its backends, which come and go).
 */

/** Clock ticks per second of the times in /proc/<pid>/stat (USER_HZ; 100 on every Linux we know of). */
const CLOCK_TICKS: number = (() => {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isInteger(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
})();

interface ProcStat {
  readonly pid: number;
  readonly ppid: number;
  /** utime + stime of the process (all its threads), ticks. */
  readonly selfTicks: number;
  /** cutime + cstime: children that exited and were reaped by this process, ticks. */
  readonly reapedTicks: number;
}

function parseStat(pid: number, text: string): ProcStat | undefined {
  // The command name (field 2) is in parentheses and may contain spaces and parentheses: split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state), so field n is fields[n - 3].
  const ppid = Number(fields[1]);
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  const cutime = Number(fields[13]);
  const cstime = Number(fields[14]);
  if (![ppid, utime, stime, cutime, cstime].every(Number.isFinite)) return undefined;
  return { pid, ppid, selfTicks: utime + stime, reapedTicks: cutime + cstime };
}

async function readStat(pid: number): Promise<ProcStat | undefined> {
  try {
    return parseStat(pid, await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined; // gone meanwhile
  }
}

async function allStats(): Promise<ProcStat[]> {
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number);
  const stats = await Promise.all(pids.map(readStat));
  return stats.filter((s): s is ProcStat => s !== undefined);
}

/** `root` and its descendants, leaving out the subtrees rooted at `exclude`. */
function tree(stats: readonly ProcStat[], root: number, exclude: ReadonlySet<number>): ProcStat[] {
  const children = new Map<number, ProcStat[]>();
  for (const s of stats) {
    const list = children.get(s.ppid);
    if (list === undefined) children.set(s.ppid, [s]);
    else list.push(s);
  }
  const byPid = new Map(stats.map((s) => [s.pid, s]));
  const rootStat = byPid.get(root);
  if (rootStat === undefined) return [];
  const found: ProcStat[] = [];
  const queue = [rootStat];
  for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
    if (exclude.has(s.pid)) continue;
    found.push(s);
    queue.push(...(children.get(s.pid) ?? []));
  }
  return found;
}

/**
 * CPU seconds used so far by `root`'s process tree (minus the excluded subtrees): every live member's own time plus
 * the time of the children each one reaped. A PostgreSQL backend that exits moves from the first sum to its
 * postmaster's second, so differences between two readings count it exactly once.
 */
export async function treeCpuSeconds(root: number, exclude: readonly number[] = []): Promise<number> {
  const members = tree(await allStats(), root, new Set(exclude));
  let ticks = 0;
  for (const s of members) ticks += s.selfTicks + s.reapedTicks;
  return ticks / CLOCK_TICKS;
}

/** The pids of `root`'s tree. */
export async function treePids(root: number): Promise<number[]> {
  return tree(await allStats(), root, new Set()).map((s) => s.pid);
}

async function statusField(pid: number, field: string): Promise<number | undefined> {
  try {
    const text = await readFile(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return match?.[1] === undefined ? undefined : Number(match[1]) * 1024;
  } catch {
    return undefined;
  }
}

/** Resident set size of one process, bytes (VmRSS). */
export function rssBytes(pid: number): Promise<number | undefined> {
  return statusField(pid, 'VmRSS');
}

/** Peak resident set size since the process started, bytes (VmHWM). */
export function peakRssBytes(pid: number): Promise<number | undefined> {
  return statusField(pid, 'VmHWM');
}

/**
 * Proportional set size summed over processes, bytes: PostgreSQL's shared buffers are mapped by every backend, so
 * adding their RSS would count them once per backend; PSS divides shared pages among the processes that map them.
 */
export async function pssBytes(pids: readonly number[]): Promise<number> {
  const sizes = await Promise.all(
    pids.map(async (pid) => {
      try {
        const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
        const match = /^Pss:\s+(\d+) kB/m.exec(text);
        return match?.[1] === undefined ? 0 : Number(match[1]) * 1024;
      } catch {
        return 0; // exited meanwhile
      }
    }),
  );
  return sizes.reduce((a, b) => a + b, 0);
}

/**
 * CPU seconds the whole machine used so far, summed over the cores (from /proc/stat): `busy` is everything but idle,
 * iowait and steal; `steal` is time the hypervisor gave to other guests. Compared with what the benchmark's own
 * processes used, `busy` shows how much other work (on these shared machines, often another test run) competed for
 * the cores during a measurement.
 */
export async function machineCpuSeconds(): Promise<{ busy: number; steal: number }> {
  const text = await readFile('/proc/stat', 'utf8');
  const fields = (text.split('\n', 1)[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already part of user and nice)
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
  return { busy: (user + nice + system + irq + softirq) / CLOCK_TICKS, steal: steal / CLOCK_TICKS };
}
