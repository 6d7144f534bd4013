import { spawn, type ChildProcess } from 'node:child_process';
import { exitStatus, terminate, trackChild, type ExitStatus } from './child-process.ts';

/**
 * A Kafka cluster for tests: librdkafka's mock cluster, run inside Debian's `kcat` (real Kafka wire protocol; kafkajs
 * producers, consumers and consumer groups work against it; topics are created on first use with 4 partitions, and
 * kafkajs's admin `createTopics` and transactions do not work). `.ci/run` installs `kcat` when it is missing. kcat
 * prints the mock cluster's bootstrap servers in its debug output, then consumes a throwaway topic until stopped by PID.
 */
export interface MockKafka {
  /** `host:port` of each mock broker. */
  readonly brokers: string[];
  readonly pid: number;
  stop(): Promise<ExitStatus>;
}

const BOOTSTRAP = /Mock cluster \S+ bootstrap\.servers=(\S+)/;

export async function startMockKafka(options: { brokers?: number; timeoutMs?: number } = {}): Promise<MockKafka> {
  const child: ChildProcess = spawn(
    'kcat',
    [
      '-X',
      `test.mock.num.brokers=${options.brokers ?? 3}`,
      '-b',
      '127.0.0.1:1',
      '-C',
      '-t',
      '_ready',
      '-d',
      'mock',
      '-q',
      '-o',
      'end',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  trackChild(child);
  const exited = exitStatus(child);
  const brokers = await new Promise<string[]>((resolve, reject) => {
    let seen = '';
    let found = false;
    const timer = setTimeout(
      () => reject(new Error(`kcat printed no mock bootstrap servers within ${options.timeoutMs ?? 10_000} ms`)),
      options.timeoutMs ?? 10_000,
    );
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`kcat could not start (is it installed? apt-get install kcat): ${err.message}`));
    });
    // kcat's debug output goes on for every request: it is read (and dropped) for as long as kcat runs, so that the
    // pipe never fills and blocks it.
    child.stderr!.on('data', (chunk: Buffer) => {
      if (found) return;
      seen += chunk.toString('utf8');
      const m = BOOTSTRAP.exec(seen);
      if (m !== null) {
        clearTimeout(timer);
        found = true;
        seen = '';
        resolve(m[1]!.split(','));
      } else if (seen.length > 100_000) {
        seen = seen.slice(-10_000);
      }
    });
    void exited.then((s) => {
      clearTimeout(timer);
      reject(new Error(`kcat exited before the mock cluster was up (code ${s.code}, signal ${s.signal})`));
    });
  });
  return {
    brokers,
    pid: child.pid!,
    stop: () => terminate(child, exited, 5_000),
  };
}
