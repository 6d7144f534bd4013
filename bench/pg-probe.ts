import { createServer } from 'node:http';
import pg from 'pg';

/**
 * Loaded into each Ratchet node of the bench's cluster mode (`node --import tsx --import bench/pg-probe.ts …`): counts
 * the node's round trips to PostgreSQL and serves the count as JSON on `127.0.0.1:$BENCH_PG_PROBE_PORT`. The runtime
 * has no such counter. Every round trip, whatever it carries (a simple query, an extended-protocol pipeline ending in
 * one Sync, a part of an explicit transaction block), ends with exactly one ReadyForQuery from the server, and every
 * connection of the runtime (pool, LISTEN client, leases) is a node-postgres `Client`; so the count of ReadyForQuery
 * messages the clients handle is the count of round trips (plus one per connection opened). The cost is one increment
 * per round trip.
 */

export interface PgProbeReading {
  readonly roundTrips: number;
}

const port = Number(process.env['BENCH_PG_PROBE_PORT']);
if (!Number.isInteger(port) || port <= 0) throw new Error('bench/pg-probe.ts needs BENCH_PG_PROBE_PORT');

let roundTrips = 0;
// node-postgres binds this method to each connection's 'readyForQuery' event when the client connects.
const client = pg.Client.prototype as unknown as { _handleReadyForQuery: (this: unknown, msg: unknown) => void };
const handle = client._handleReadyForQuery;
if (typeof handle !== 'function') throw new Error('bench/pg-probe.ts: this node-postgres has no _handleReadyForQuery');
client._handleReadyForQuery = function (this: unknown, msg: unknown): void {
  roundTrips++;
  handle.call(this, msg);
};

const server = createServer((_req, res) => {
  const reading: PgProbeReading = { roundTrips };
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify(reading));
});
server.listen(port, '127.0.0.1');
// The runtime's own shutdown decides when the process ends.
server.unref();
