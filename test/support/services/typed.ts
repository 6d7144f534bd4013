import * as restate from '@restatedev/restate-sdk';

/**
 * The Typed service of restate's lab: handlers whose serdes advertise JSON schemas, binary and empty bodies, and a
 * private handler, with service and handler metadata; what the admin API's service rendering and per-service OpenAPI
 * document are tested with.
 */

/** A JSON serde that advertises `jsonSchema` in the manifest (what a schema library would generate). */
export function jsonSerdeWithSchema<T>(jsonSchema: object): restate.Serde<T> {
  const json = new restate.serde.JsonSerde<T>();
  return {
    contentType: 'application/json',
    jsonSchema,
    serialize: (value: T) => json.serialize(value),
    deserialize: (data: Uint8Array) => json.deserialize(data),
  };
}

/** A schema with a title and a `$defs` reference. */
export const person = jsonSerdeWithSchema<{ name: string }>({
  type: 'object',
  title: 'Person',
  properties: { name: { type: 'string' }, friend: { $ref: '#/$defs/Friend' } },
  required: ['name'],
  $defs: { Friend: { type: 'object', properties: { n: { type: 'string' } } } },
});

export interface TypedSettings {
  /** The `greet` handler's documentation (restate's captured OpenAPI documents have `greets a person`). */
  readonly greetDescription?: string;
}

export function typedService(settings: TypedSettings = {}) {
  return restate.service({
    name: 'Typed',
    description: 'typed things',
    metadata: { team: 'lab' },
    handlers: {
      greet: restate.handlers.handler(
        {
          input: person,
          output: jsonSerdeWithSchema<string>({ type: 'string' }),
          ...(settings.greetDescription === undefined ? {} : { description: settings.greetDescription }),
          metadata: { k: 'v' },
        },
        (_ctx: restate.Context, p: { name: string }) => Promise.resolve(p.name),
      ),
      bin: restate.handlers.handler(
        { input: restate.serde.binary, output: restate.serde.binary },
        (_ctx: restate.Context, b: Uint8Array) => Promise.resolve(b),
      ),
      nothing: restate.handlers.handler({ input: restate.serde.empty, output: restate.serde.empty }, () =>
        Promise.resolve(),
      ),
      hidden: restate.handlers.handler({ ingressPrivate: true }, () => Promise.resolve('hidden')),
    },
  });
}
