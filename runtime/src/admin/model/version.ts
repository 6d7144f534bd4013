import { Type, type Static } from '@sinclair/typebox';
import { Component, MapOf, Nullable } from './json-schema.ts';

/** `GET /version`. */
export const VersionInformation = Component(
  'VersionInformation',
  Type.Object({
    version: Type.String({ description: "Ratchet's version." }),
    min_admin_api_version: Type.Integer({ minimum: 0 }),
    max_admin_api_version: Type.Integer({ minimum: 0 }),
    ingress_endpoint: Type.Optional(Nullable(Type.String())),
    features: MapOf(Type.Boolean()),
  }),
);
export type VersionInformation = Static<typeof VersionInformation>;
