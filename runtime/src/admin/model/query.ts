import { Type, type Static } from '@sinclair/typebox';
import { AnyObject, Component } from './json-schema.ts';

/* `POST /query`: SQL over the introspection tables. */

export const QueryRequest = Component(
  'QueryRequest',
  Type.Object({ query: Type.String({ description: 'One SQL statement.' }) }),
);
export type QueryRequest = Static<typeof QueryRequest>;

export const QueryResponse = Component(
  'QueryResponse',
  Type.Object(
    { rows: Type.Array(AnyObject()) },
    { description: 'With `accept: application/json`; otherwise the answer is an Arrow IPC stream.' },
  ),
);
export type QueryResponse = Static<typeof QueryResponse>;
