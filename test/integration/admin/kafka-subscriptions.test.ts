import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { SchemaRegistry } from '../../../runtime/src/schema/registry.ts';
import { counter } from '../../support/services/counter.ts';
import { greeterService } from '../../support/services/greeter.ts';
import { signup } from '../../support/services/signup.ts';
import { waitFor } from '../../support/wait.ts';
import { adminRequest, captureLogger, expectError, expectText, type Answer, type Method } from './admin-requests.ts';
import { sdkHandler, serve, startAdminHarness, type AdminHarness, type TestServer } from './harness.ts';

/*
 * The Kafka side of the registry: `/kafka-clusters` (registered, or from the configuration file and read-only) and
 * `/subscriptions` with every META0009 case. Nothing connects to a broker: clusters point at closed ports.
 */

// Private: a subscription may target what the ingress does not expose.
const greeter = greeterService({ options: { ingressPrivate: true } });

const STATIC_CLUSTERS = JSON.stringify([
  { name: 'from-config', brokers: ['127.0.0.1:9', '127.0.0.1:10'], security: { protocol: 'plaintext' } },
]);
const SUB_ID = /^sub_1[0-9A-Za-z]{22}$/;

let admin: AdminHarness;
let server: TestServer;
const log = captureLogger();

function request(method: Method, url: string, body?: unknown, headers?: Record<string, string>): Promise<Answer> {
  return adminRequest(admin.app, method, url, body, headers);
}

function subscribe(source: string, sink: string, options?: unknown): Promise<Answer> {
  return request('POST', '/subscriptions', { source, sink, ...(options === undefined ? {} : { options }) });
}

beforeAll(async () => {
  admin = await startAdminHarness({ logger: log.logger, env: { RATCHET_KAFKA_CLUSTERS: STATIC_CLUSTERS } });
  server = await serve('h2', sdkHandler([greeter, counter, signup]));
  expect((await request('POST', '/deployments', { uri: server.url })).status).toBe(201);
});

afterAll(async () => {
  await server?.close();
  await admin?.close();
});

describe('/kafka-clusters', () => {
  it('lists the configuration file’s clusters, read-only, from the start', async () => {
    const list = await request('GET', '/kafka-clusters');
    expect(list.status).toBe(200);
    expect(list.json()).toEqual({
      clusters: [
        {
          name: 'from-config',
          properties: { 'metadata.broker.list': '127.0.0.1:9,127.0.0.1:10', 'security.protocol': 'plaintext' },
          created_at: '1970-01-01T00:00:00Z',
          info: [
            {
              message:
                'This Kafka cluster is defined in the configuration file (kafka-clusters / RATCHET_KAFKA_CLUSTERS); ' +
                'it cannot be changed or deleted through the admin API.',
            },
          ],
        },
      ],
    });
    const patch = { properties: { 'bootstrap.servers': '127.0.0.1:1' } };
    for (const answer of [
      await request('PATCH', '/kafka-clusters/from-config', patch),
      await request('DELETE', '/kafka-clusters/from-config'),
      await request('DELETE', '/kafka-clusters/from-config?force=true'),
    ]) {
      expect(expectError(answer, 409, null)).toContain("kafka cluster 'from-config' cannot be updated");
    }
    expect(expectError(await request('POST', '/kafka-clusters', { name: 'from-config', ...patch }), 409, null)).toBe(
      "kafka cluster 'from-config' conflicts with static configuration. Cluster names in schema registry cannot " +
        'override statically configured clusters.',
    );
  });

  it('registers a cluster (201, location), refuses a second one with the same name (409)', async () => {
    const properties = { 'bootstrap.servers': '127.0.0.1:1', 'sasl.password': 'secret', 'sasl.username': 'me' };
    const created = await request('POST', '/kafka-clusters', { name: 'my-cluster', properties });
    expect(created.status, created.text).toBe(201);
    expect(created.headers['location']).toBe('kafka-clusters/my-cluster');
    const body = created.json();
    expect(Object.keys(body)).toEqual(['name', 'properties', 'created_at']);
    // Credentials are never shown.
    expect(body['properties']).toEqual({
      'bootstrap.servers': '127.0.0.1:1',
      'sasl.password': '***',
      'sasl.username': '***',
    });
    expect(String(body['created_at'])).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{9})?Z$/);
    expect(log.matching('kafka cluster registered').at(-1)).toMatchObject({ 'kafka.cluster': 'my-cluster' });

    expect(expectError(await request('POST', '/kafka-clusters', { name: 'my-cluster', properties }), 409, null)).toBe(
      "kafka cluster 'my-cluster' already exists in schema registry",
    );
    const one = await request('GET', '/kafka-clusters/my-cluster');
    expect(one.json()).toEqual({ ...body, subscriptions: [] });
    const list = (await request('GET', '/kafka-clusters')).json()['clusters'] as { name: string }[];
    expect(list.map((c) => c.name)).toEqual(['my-cluster', 'from-config']);
  });

  it('validates names and properties', async () => {
    expect(
      expectError(await request('POST', '/kafka-clusters', { name: 'other', properties: { foo: 'bar' } }), 400, null),
    ).toBe("kafka cluster 'other' properties must contain either 'bootstrap.servers' or 'metadata.broker.list'");
    const cases: [unknown, string][] = [
      [{ name: 'x' }, 'missing field `properties`'],
      [{ properties: { 'bootstrap.servers': 'h:1' } }, 'missing field `name`'],
      [{ name: '', properties: { 'bootstrap.servers': 'h:1' } }, 'name: empty string'],
      [{ name: 'My_Cluster!', properties: { 'bootstrap.servers': 'h:1' } }, "name: 'My_Cluster!' is not a valid"],
      [
        { name: 'y', properties: { 'bootstrap.servers': 1 } },
        'properties.bootstrap.servers: invalid type: integer `1`',
      ],
      [{ name: 'y', properties: [] }, 'properties: invalid type: sequence, expected a map'],
    ];
    for (const [body, detail] of cases) {
      expect(expectText(await request('POST', '/kafka-clusters', body), 422)).toContain(detail);
    }
    expectText(await request('POST', '/kafka-clusters', '{}', { 'content-type': 'text/plain' }), 415);
    expect((await request('GET', '/kafka-clusters/other')).status).toBe(404);
  });

  it('updates properties (200), with the same checks; unknown clusters are 404', async () => {
    const answer = await request('PATCH', '/kafka-clusters/my-cluster', {
      properties: { 'bootstrap.servers': '127.0.0.1:2' },
    });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json()).toMatchObject({ name: 'my-cluster', properties: { 'bootstrap.servers': '127.0.0.1:2' } });
    expect(Object.keys(answer.json())).toEqual(['name', 'properties', 'created_at']);
    expect(
      expectError(await request('PATCH', '/kafka-clusters/my-cluster', { properties: { foo: 'bar' } }), 400, null),
    ).toContain('must contain either');
    expect(expectText(await request('PATCH', '/kafka-clusters/my-cluster', {}), 422)).toContain(
      'missing field `properties`',
    );
    expect(
      expectError(
        await request('PATCH', '/kafka-clusters/nope', { properties: { 'bootstrap.servers': 'h:1' } }),
        404,
        null,
      ),
    ).toBe("not found in the schema registry: kafka cluster 'nope'");
    expect(expectError(await request('GET', '/kafka-clusters/nope'), 404, null)).toBe(
      "The requested Kafka cluster 'nope' does not exist",
    );
    expect(expectError(await request('DELETE', '/kafka-clusters/nope'), 404, null)).toBe(
      "not found in the schema registry: kafka cluster named 'nope'",
    );
    expect(expectText(await request('GET', '/kafka-clusters/my-cluster?include_subscriptions=yes'), 400)).toBe(
      'Failed to deserialize query string: include_subscriptions: provided string was not `true` or `false`',
    );
    const wrongMethod = await request('PUT', '/kafka-clusters/my-cluster', {});
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers['allow']).toBe('GET,HEAD,PATCH,DELETE');
  });
});

describe('/subscriptions', () => {
  let id: string;

  it('creates one (201, location), filling in group.id and client.id', async () => {
    const created = await subscribe('kafka://my-cluster/orders', 'service://Counter/add', {
      'auto.offset.reset': 'earliest',
    });
    expect(created.status, created.text).toBe(201);
    const body = created.json();
    id = String(body['id']);
    expect(id).toMatch(SUB_ID);
    expect(created.headers['location']).toBe(`subscriptions/${id}`);
    expect(body).toEqual({
      id,
      source: 'kafka://my-cluster/orders',
      sink: 'service://Counter/add',
      options: { 'auto.offset.reset': 'earliest', 'group.id': id, 'client.id': 'restate' },
    });
    expect((await request('GET', `/subscriptions/${id}`)).json()).toEqual(body);
    expect((await request('GET', '/subscriptions')).json()).toEqual({ subscriptions: [body] });
  });

  it('accepts every sink that can take a stream of records, and keeps given group.id/client.id', async () => {
    const accepted: [string, string, Record<string, string> | null][] = [
      ['kafka://my-cluster/greetings', 'service://Greeter/greet', null], // a private service: Kafka is not the ingress
      ['kafka://from-config/signups', 'service://Signup/run', { 'group.id': 'mine', 'client.id': 'me' }],
      ['kafka://my-cluster/a.b_c-1', 'service://Counter/add', {}],
    ];
    for (const [source, sink, options] of accepted) {
      const answer = await subscribe(source, sink, options);
      expect(answer.status, answer.text).toBe(201);
      if (options?.['group.id'] !== undefined) expect(answer.json()['options']).toEqual(options);
    }
  });

  it('filters by exact sink and source', async () => {
    const bySink = (await request('GET', '/subscriptions?sink=service://Counter/add')).json()['subscriptions'] as {
      sink: string;
    }[];
    expect(bySink.map((s) => s.sink)).toEqual(['service://Counter/add', 'service://Counter/add']);
    const both = (
      await request('GET', '/subscriptions?sink=service://Counter/add&source=kafka://my-cluster/orders')
    ).json()['subscriptions'] as { id: string }[];
    expect(both.map((s) => s.id)).toEqual([id]);
    expect((await request('GET', '/subscriptions?source=kafka://nope/x')).json()).toEqual({ subscriptions: [] });
    const withSubs = (await request('GET', '/kafka-clusters/my-cluster?include_subscriptions=true')).json();
    expect((withSubs['subscriptions'] as unknown[]).length).toBe(3);
    expect((await request('GET', '/kafka-clusters/my-cluster?include_subscriptions=false')).json()).toMatchObject({
      subscriptions: [],
    });
  });

  it('META0009 for every subscription that cannot work, naming the problem', async () => {
    const refused: [string, string, string][] = [
      [
        'foo://bar/baz',
        'service://Greeter/greet',
        "invalid source URI 'foo://bar/baz': must have a scheme segment, with supported schemes: [kafka].",
      ],
      ['KAFKA://my-cluster/t', 'service://Greeter/greet', 'with supported schemes: [kafka]'],
      ['abc', 'service://Greeter/greet', "invalid source URI 'abc': must have a scheme segment"],
      ['kafka:/x', 'service://Greeter/greet', 'must have a authority segment containing the cluster name'],
      ['kafka:///t', 'service://Greeter/greet', 'must have a authority segment containing the cluster name'],
      ['kafka://my-cluster', 'service://Greeter/greet', 'the topic name is missing'],
      ['kafka://my-cluster/', 'service://Greeter/greet', 'the topic name is missing'],
      ['kafka://my-cluster/a/b', 'service://Greeter/greet', "'a/b' is not a valid Kafka topic name"],
      ['kafka://my-cluster/t?x=1', 'service://Greeter/greet', "'t?x=1' is not a valid Kafka topic name"],
      ['kafka://my-cluster/t 1', 'service://Greeter/greet', 'it contains whitespace or control characters'],
      [
        'kafka://my-cluster/t',
        'foo://Greeter/greet',
        "invalid sink URI 'foo://Greeter/greet': must have a scheme segment, with supported schemes: [service].",
      ],
      ['kafka://my-cluster/t', 'service:///greet', 'must have a authority segment containing the service name'],
      [
        'kafka://my-cluster/t',
        'service://Nope/greet',
        "invalid sink URI 'service://Nope/greet': cannot find service/handler specified in the sink URI.",
      ],
      ['kafka://my-cluster/t', 'service://Greeter', 'cannot find service/handler'],
      ['kafka://my-cluster/t', 'service://Greeter/nope', 'cannot find service/handler'],
      ['kafka://my-cluster/t', 'service://Greeter/greet/extra', 'cannot find service/handler'],
      // The sink is checked before the cluster, like restate.
      ['kafka://bogus-cluster/t', 'service://Nope/greet', 'cannot find service/handler'],
      [
        'kafka://bogus-cluster/t',
        'service://Greeter/greet',
        'Kafka cluster \'bogus-cluster\' not found. Available clusters: ["my-cluster", "from-config"]',
      ],
    ];
    for (const [source, sink, problem] of refused) {
      const message = expectError(await subscribe(source, sink), 400, 'META0009');
      expect(message, `${source} -> ${sink}`).toContain(problem);
    }
    expect(((await request('GET', '/subscriptions')).json()['subscriptions'] as unknown[]).length).toBe(4);
    // Shared handlers of objects and workflows are sinks too, as in restate (their records run in parallel).
    for (const sink of ['service://Counter/get', 'service://Signup/approve']) {
      const created = await subscribe('kafka://my-cluster/t', sink);
      expect(created.status, sink).toBe(201);
      const id = created.json()['id'] as string;
      expect((await request('DELETE', `/subscriptions/${id}`)).status).toBe(202);
    }
  });

  it('refuses bodies of the wrong shape with 422, and malformed or unknown ids', async () => {
    const cases: [unknown, string][] = [
      [{ source: 'kafka://my-cluster/t' }, 'missing field `sink`'],
      [{ sink: 'service://Greeter/greet' }, 'missing field `source`'],
      [{ source: 1, sink: 'service://Greeter/greet' }, 'source: invalid type: integer `1`, expected a string'],
      [
        { source: 'kafka://my-cluster/t', sink: 'service://Greeter/greet', options: { a: 1 } },
        'options.a: invalid type',
      ],
      [
        { source: 'kafka://my-cluster/t', sink: 'service://Greeter/greet', options: [] },
        'options: invalid type: sequence',
      ],
      [[], 'invalid type: sequence, expected struct CreateSubscriptionRequest'],
    ];
    for (const [body, detail] of cases) {
      expect(expectText(await request('POST', '/subscriptions', body), 422)).toContain(detail);
    }
    expect(expectText(await request('GET', '/subscriptions/sub_bogus'), 400)).toBe(
      'Invalid URL: Cannot parse `subscription` with value `sub_bogus`: unrecognized codec version',
    );
    expectText(await request('DELETE', '/subscriptions/dp_13o2BJB8AzAA9KIwPxc6xX3'), 400);
    const unknown = 'sub_11XHoawrCyWbcyaE8QnyBpm';
    expect(expectError(await request('GET', `/subscriptions/${unknown}`), 404, null)).toBe(
      `The requested subscription '${unknown}' does not exist`,
    );
    expect(expectError(await request('DELETE', `/subscriptions/${unknown}`), 404, null)).toBe(
      `not found in the schema registry: subscription with id '${unknown}'`,
    );
  });

  it('keeps a cluster with subscriptions unless forced; deleting orphans them', async () => {
    expect(expectError(await request('DELETE', '/kafka-clusters/my-cluster'), 409, null)).toMatch(
      /^Removing the kafka cluster 'my-cluster' leads to subscriptions 'sub_1\w+', 'sub_1\w+', 'sub_1\w+' being orphans\. Remove the subscription first, or use the 'force' flag\.$/,
    );
    expectText(await request('DELETE', '/kafka-clusters/my-cluster?force=maybe'), 400);
    const deleted = await request('DELETE', '/kafka-clusters/my-cluster?force=true');
    expect(deleted.status).toBe(202);
    expect(deleted.text).toBe('');
    expect((await request('GET', '/kafka-clusters/my-cluster')).status).toBe(404);
    // The orphans stay listed, as in restate.
    expect((await request('GET', `/subscriptions/${id}`)).status).toBe(200);
    expect(log.matching('kafka cluster deleted with force').at(-1)).toMatchObject({ level: 40 });
  });

  it('deletes subscriptions (202, then 404), and every change reaches other processes', async () => {
    const config = loadConfig({ env: {} });
    const other = new SchemaRegistry(
      admin.registry.store,
      config.serviceDefaults,
      config.defaultRetryPolicy,
      config.invoker,
    );
    const watch = await other.watch(() => undefined);
    try {
      await waitFor(() => expect(other.subscription(id)).toBeDefined());
      const deleted = await request('DELETE', `/subscriptions/${id}`);
      expect(deleted.status).toBe(202);
      expect(deleted.text).toBe('');
      await waitFor(() => expect(other.subscription(id)).toBeUndefined());
      expect((await request('DELETE', `/subscriptions/${id}`)).status).toBe(404);

      expect(
        (await request('POST', '/kafka-clusters', { name: 'late', properties: { 'bootstrap.servers': 'h:1' } })).status,
      ).toBe(201);
      await waitFor(() => expect(other.kafkaCluster('late')?.properties).toEqual({ 'bootstrap.servers': 'h:1' }));
    } finally {
      await watch.close();
    }
  });
});
