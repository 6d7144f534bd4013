import { Type, type Static } from '@sinclair/typebox';
import { Component, Nullable } from './json-schema.ts';

/** The JSON body of every refusal the admin API can express in JSON (requests it cannot read are plain text). */
export const ErrorDescriptionResponse = Component(
  'ErrorDescriptionResponse',
  Type.Object(
    {
      message: Type.String(),
      restate_code: Type.Optional(
        Nullable(Type.String(), { description: 'Error code (META/RT), as restate clients read it.' }),
      ),
      service_code: Type.Optional(
        Nullable(Type.String(), { description: "The same code, under the specification's name." }),
      ),
    },
    { description: 'Error details. Coded errors start their message with `[CODE] `.' },
  ),
);
export type ErrorDescriptionResponse = Static<typeof ErrorDescriptionResponse>;
