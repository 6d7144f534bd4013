import { Type, type Static } from '@sinclair/typebox';
import { Component, Nullable } from './json-schema.ts';

/** Shared by several resource families: deployment ids (services name theirs) and the notes attached to answers. */

export const DeploymentId = Component(
  'DeploymentId',
  Type.String({ description: '`dp_1` followed by 22 base62 characters.' }),
);
export type DeploymentId = Static<typeof DeploymentId>;

/** A note on a deployment, service, handler or Kafka cluster: a deprecation, a setting not applied (RT0021), … */
export const SchemaInfo = Component(
  'SchemaInfo',
  Type.Object({ code: Type.Optional(Nullable(Type.String())), message: Type.String() }),
);
export type SchemaInfo = Static<typeof SchemaInfo>;
