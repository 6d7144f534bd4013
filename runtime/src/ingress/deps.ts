import type { Logger } from 'pino';
import type { Engine } from '../engine/engine.ts';
import type { SchemaRegistry } from '../schema/registry.ts';

export interface IngressDeps {
  engine: Engine;
  registry: SchemaRegistry;
  logger: Logger;
  requestSizeLimit: number;
}
