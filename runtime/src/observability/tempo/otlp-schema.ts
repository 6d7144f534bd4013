/*
 * The protobuf schema of what Tempo's trace-by-id answers: OTLP's trace model (opentelemetry/proto/{common,resource,
 * trace}/v1, current field numbers) and Tempo's wrappers `tempopb.Trace` (v1 API) and `tempopb.TraceByIDResponse`
 * (v2 API). Written here as descriptors for @bufbuild/protobuf, which then encodes protobuf and protojson (Tempo's JSON
 * is gogo jsonpb: lowerCamelCase names, 64-bit integers as strings, bytes as base64, enums by name, defaults omitted).
 * @opentelemetry/otlp-transformer only serializes SDK ReadableSpans, not stored records, so it is not used.
 */
import { type DescMessage, createFileRegistry } from '@bufbuild/protobuf';
import {
  type FieldDescriptorProto,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
  FileDescriptorSetSchema,
} from '@bufbuild/protobuf/wkt';
import { create } from '@bufbuild/protobuf';

const T = FieldDescriptorProto_Type;
const SCALARS: Readonly<Record<string, FieldDescriptorProto_Type>> = {
  string: T.STRING,
  bool: T.BOOL,
  int64: T.INT64,
  uint32: T.UINT32,
  uint64: T.UINT64,
  double: T.DOUBLE,
  bytes: T.BYTES,
  fixed32: T.FIXED32,
  fixed64: T.FIXED64,
};

/** `[name, number, type]`; type is a scalar name, `.pkg.Message`, or `enum .pkg.Enum`; `repeated` and `oneof` flags. */
type FieldSpec = readonly [string, number, string, ('repeated' | `oneof:${number}`)?];

interface MessageSpec {
  readonly name: string;
  readonly fields: readonly FieldSpec[];
  readonly oneofs?: readonly string[];
  readonly messages?: readonly MessageSpec[];
  readonly enums?: readonly EnumSpec[];
}

interface EnumSpec {
  readonly name: string;
  readonly values: readonly string[];
}

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

function field([name, number, type, flag]: FieldSpec): Partial<FieldDescriptorProto> {
  const scalar = SCALARS[type];
  const isEnum = type.startsWith('enum ');
  return {
    name,
    number,
    jsonName: camel(name),
    label: flag === 'repeated' ? FieldDescriptorProto_Label.REPEATED : FieldDescriptorProto_Label.OPTIONAL,
    type: scalar ?? (isEnum ? T.ENUM : T.MESSAGE),
    ...(scalar === undefined ? { typeName: isEnum ? type.slice(5) : type } : {}),
    ...(flag?.startsWith('oneof:') === true ? { oneofIndex: Number(flag.slice(6)) } : {}),
  };
}

function message(m: MessageSpec): object {
  return {
    name: m.name,
    field: m.fields.map(field),
    oneofDecl: (m.oneofs ?? []).map((name) => ({ name })),
    nestedType: (m.messages ?? []).map(message),
    enumType: (m.enums ?? []).map(enumType),
  };
}

function enumType(e: EnumSpec): object {
  return { name: e.name, value: e.values.map((name, number) => ({ name, number })) };
}

function file(name: string, pkg: string, deps: string[], messages: MessageSpec[], enums: EnumSpec[] = []) {
  return create(FileDescriptorProtoSchema, {
    name,
    package: pkg,
    dependency: deps,
    syntax: 'proto3',
    messageType: messages.map(message),
    enumType: enums.map(enumType),
  });
}

const C = '.opentelemetry.proto.common.v1';
const TR = '.opentelemetry.proto.trace.v1';

const common = file(
  'opentelemetry/proto/common/v1/common.proto',
  'opentelemetry.proto.common.v1',
  [],
  [
    {
      name: 'AnyValue',
      oneofs: ['value'],
      fields: [
        ['string_value', 1, 'string', 'oneof:0'],
        ['bool_value', 2, 'bool', 'oneof:0'],
        ['int_value', 3, 'int64', 'oneof:0'],
        ['double_value', 4, 'double', 'oneof:0'],
        ['array_value', 5, `${C}.ArrayValue`, 'oneof:0'],
        ['kvlist_value', 6, `${C}.KeyValueList`, 'oneof:0'],
        ['bytes_value', 7, 'bytes', 'oneof:0'],
      ],
    },
    { name: 'ArrayValue', fields: [['values', 1, `${C}.AnyValue`, 'repeated']] },
    { name: 'KeyValueList', fields: [['values', 1, `${C}.KeyValue`, 'repeated']] },
    {
      name: 'KeyValue',
      fields: [
        ['key', 1, 'string'],
        ['value', 2, `${C}.AnyValue`],
      ],
    },
    {
      name: 'InstrumentationScope',
      fields: [
        ['name', 1, 'string'],
        ['version', 2, 'string'],
        ['attributes', 3, `${C}.KeyValue`, 'repeated'],
        ['dropped_attributes_count', 4, 'uint32'],
      ],
    },
  ],
);

const resource = file(
  'opentelemetry/proto/resource/v1/resource.proto',
  'opentelemetry.proto.resource.v1',
  [common.name],
  [
    {
      name: 'Resource',
      fields: [
        ['attributes', 1, `${C}.KeyValue`, 'repeated'],
        ['dropped_attributes_count', 2, 'uint32'],
      ],
    },
  ],
);

const trace = file(
  'opentelemetry/proto/trace/v1/trace.proto',
  'opentelemetry.proto.trace.v1',
  [common.name, resource.name],
  [
    { name: 'TracesData', fields: [['resource_spans', 1, `${TR}.ResourceSpans`, 'repeated']] },
    {
      name: 'ResourceSpans',
      fields: [
        ['resource', 1, '.opentelemetry.proto.resource.v1.Resource'],
        ['scope_spans', 2, `${TR}.ScopeSpans`, 'repeated'],
        ['schema_url', 3, 'string'],
      ],
    },
    {
      name: 'ScopeSpans',
      fields: [
        ['scope', 1, `${C}.InstrumentationScope`],
        ['spans', 2, `${TR}.Span`, 'repeated'],
        ['schema_url', 3, 'string'],
      ],
    },
    {
      name: 'Span',
      fields: [
        ['trace_id', 1, 'bytes'],
        ['span_id', 2, 'bytes'],
        ['trace_state', 3, 'string'],
        ['parent_span_id', 4, 'bytes'],
        ['flags', 16, 'fixed32'],
        ['name', 5, 'string'],
        ['kind', 6, `enum ${TR}.Span.SpanKind`],
        ['start_time_unix_nano', 7, 'fixed64'],
        ['end_time_unix_nano', 8, 'fixed64'],
        ['attributes', 9, `${C}.KeyValue`, 'repeated'],
        ['dropped_attributes_count', 10, 'uint32'],
        ['events', 11, `${TR}.Span.Event`, 'repeated'],
        ['dropped_events_count', 12, 'uint32'],
        ['links', 13, `${TR}.Span.Link`, 'repeated'],
        ['dropped_links_count', 14, 'uint32'],
        ['status', 15, `${TR}.Status`],
      ],
      messages: [
        {
          name: 'Event',
          fields: [
            ['time_unix_nano', 1, 'fixed64'],
            ['name', 2, 'string'],
            ['attributes', 3, `${C}.KeyValue`, 'repeated'],
            ['dropped_attributes_count', 4, 'uint32'],
          ],
        },
        {
          name: 'Link',
          fields: [
            ['trace_id', 1, 'bytes'],
            ['span_id', 2, 'bytes'],
            ['trace_state', 3, 'string'],
            ['attributes', 4, `${C}.KeyValue`, 'repeated'],
            ['dropped_attributes_count', 5, 'uint32'],
            ['flags', 6, 'fixed32'],
          ],
        },
      ],
      enums: [
        {
          name: 'SpanKind',
          values: [
            'SPAN_KIND_UNSPECIFIED',
            'SPAN_KIND_INTERNAL',
            'SPAN_KIND_SERVER',
            'SPAN_KIND_CLIENT',
            'SPAN_KIND_PRODUCER',
            'SPAN_KIND_CONSUMER',
          ],
        },
      ],
    },
    {
      name: 'Status',
      fields: [
        ['message', 2, 'string'],
        ['code', 3, `enum ${TR}.Status.StatusCode`],
      ],
      enums: [{ name: 'StatusCode', values: ['STATUS_CODE_UNSET', 'STATUS_CODE_OK', 'STATUS_CODE_ERROR'] }],
    },
  ],
);

const tempo = file(
  'tempopb/tempo.proto',
  'tempopb',
  [trace.name],
  [
    // Tempo names this field `resourceSpans` in the .proto itself; the v1 JSON renames it to `batches`.
    { name: 'Trace', fields: [['resourceSpans', 1, `${TR}.ResourceSpans`, 'repeated']] },
    { name: 'TraceByIDMetrics', fields: [['inspectedBytes', 1, 'uint64']] },
    {
      name: 'TraceByIDResponse',
      fields: [
        ['trace', 1, '.tempopb.Trace'],
        ['metrics', 2, '.tempopb.TraceByIDMetrics'],
        ['status', 3, 'enum .tempopb.PartialStatus'],
        ['message', 4, 'string'],
      ],
    },
  ],
  [{ name: 'PartialStatus', values: ['COMPLETE', 'PARTIAL'] }],
);

const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: [common, resource, trace, tempo] }));

function messageDesc(typeName: string): DescMessage {
  const d = registry.getMessage(typeName);
  if (d === undefined) throw new Error(`OTLP schema: ${typeName} missing`);
  return d;
}

export const TracesDataSchema = messageDesc('opentelemetry.proto.trace.v1.TracesData');
export const ResourceSpansSchema = messageDesc('opentelemetry.proto.trace.v1.ResourceSpans');
/** Tempo's `Trace`: the v1 trace-by-id answer (protobuf; JSON with `batches`). */
export const TempoTraceSchema = messageDesc('tempopb.Trace');
/** Tempo's `TraceByIDResponse`: the v2 trace-by-id answer. */
export const TraceByIDResponseSchema = messageDesc('tempopb.TraceByIDResponse');
