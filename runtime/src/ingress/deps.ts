import type { Logger } from 'pino';
import type { Authenticator } from '../auth/verifier.ts';
import type { Engine } from '../engine/engine.ts';
import type { SchemaRegistry } from '../schema/registry.ts';

export interface IngressDeps {
  engine: Engine;
  registry: SchemaRegistry;
  logger: Logger;
  requestSizeLimit: number;
  /** Managed mode: every request needs an access token. Undefined = dev mode, no authentication. */
  auth?: Authenticator | undefined;
}
