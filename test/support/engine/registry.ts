import type { SchemaRegistry } from '../../../runtime/src/schema/registry.ts';
import type {
  ActiveService,
  DeploymentSchema,
  HandlerSchema,
  HandlerType,
  ServiceDefaults,
  ServiceSchema,
  ServiceType,
} from '../../../runtime/src/schema/types.ts';

/**
 * The schema registry as the engine reads it — `service(name)`, `deployment(id)` and the service defaults — over a
 * fixed set of services of one deployment, without a database or discovery:
 *
 * - `Greeter` (service): `greet`;
 * - `Counter` (virtual object): `add` (exclusive), `get` (shared);
 * - `Signup` (workflow): `run` (the workflow), `status` (shared).
 */

export const DEPLOYMENT_ID = 'dp_11111111111111111111111111';

export const SERVICES = {
  Greeter: { ty: 'Service', handlers: { greet: undefined } },
  Counter: { ty: 'VirtualObject', handlers: { add: 'Exclusive', get: 'Shared' } },
  Signup: { ty: 'Workflow', handlers: { run: 'Workflow', status: 'Shared' } },
} as const satisfies Record<string, { ty: ServiceType; handlers: Record<string, HandlerType | undefined> }>;

export type ServiceName = keyof typeof SERVICES;
export type HandlerName<S extends ServiceName> = keyof (typeof SERVICES)[S]['handlers'] & string;

export const DEFAULTS: ServiceDefaults = {
  idempotencyRetentionMs: 3_600_000,
  journalRetentionMs: 600_000,
  maxJournalRetentionMs: undefined,
  workflowCompletionRetentionMs: 86_400_000,
  inactivityTimeoutMs: 60_000,
  abortTimeoutMs: 60_000,
  retryPolicy: {
    initialIntervalMs: 10,
    exponentiationFactor: 1,
    maxIntervalMs: 10,
    maxAttempts: 3,
    onMaxAttempts: 'Kill',
  },
};

function handlerSchema(name: string, ty: HandlerType | undefined): HandlerSchema {
  return {
    name,
    ...(ty === undefined ? {} : { ty }),
    input: { required: false },
    output: { setContentTypeIfEmpty: false },
    retryPolicy: {},
  };
}

export class StubRegistry implements Pick<SchemaRegistry, 'service' | 'deployment' | 'defaults'> {
  readonly defaults: ServiceDefaults;
  readonly deploymentSchema: DeploymentSchema;
  private readonly services = new Map<string, ActiveService>();

  constructor(
    options: { retryPolicy?: Partial<ServiceDefaults['retryPolicy']>; protocolVersions?: [number, number] } = {},
  ) {
    this.defaults = { ...DEFAULTS, retryPolicy: { ...DEFAULTS.retryPolicy, ...options.retryPolicy } };
    const [min, max] = options.protocolVersions ?? [5, 6];
    this.deploymentSchema = {
      id: DEPLOYMENT_ID,
      endpoint: { kind: 'http', uri: 'http://scripted.invalid:9080/', httpVersion: 'HTTP/2.0' },
      protocolType: 'BidiStream',
      additionalHeaders: {},
      metadata: {},
      minProtocolVersion: min,
      maxProtocolVersion: max,
      createdAt: new Date(0),
      services: Object.keys(SERVICES).map((name) => ({ name, revision: 1 })),
    };
    for (const [name, s] of Object.entries(SERVICES)) {
      const schema: ServiceSchema = {
        name,
        ty: s.ty,
        handlers: Object.entries(s.handlers).map(([h, ty]) => handlerSchema(h, ty)),
        retryPolicy: {},
      };
      this.services.set(name, { schema, revision: 1, deploymentId: DEPLOYMENT_ID, overrides: {} });
    }
  }

  service(name: string): ActiveService | undefined {
    return this.services.get(name);
  }

  deployment(id: string): DeploymentSchema | undefined {
    return id === DEPLOYMENT_ID ? this.deploymentSchema : undefined;
  }

  handler<S extends ServiceName>(service: S, handler: HandlerName<S>): HandlerSchema {
    const h = this.services.get(service)?.schema.handlers.find((x) => x.name === handler);
    if (h === undefined) throw new Error(`no handler ${service}/${handler}`);
    return h;
  }

  /** The engine's dependency is typed as the whole registry; it calls only what this stub has. */
  asSchemaRegistry(): SchemaRegistry {
    return this as unknown as SchemaRegistry;
  }
}
