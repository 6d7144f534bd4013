/**
 * A small JSON Schema checker for the subset the admin OpenAPI document uses (`$ref` into `components.schemas`,
 * `type` with arrays of types, `properties`, `required`, `items`, `additionalProperties`, `enum`, `oneOf`, `minimum`).
 * Returns the problems found, each with the JSON path; an empty list means the value conforms.
 */

type Schema = Record<string, unknown>;

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function matchesType(value: unknown, type: string): boolean {
  const actual = typeOf(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

/**
 * `strict`: an object schema with `properties` and no `additionalProperties` also refuses undeclared properties,
 * so a response field the document forgot is caught.
 */
export function validate(
  value: unknown,
  schema: Schema,
  components: Record<string, Schema>,
  strict = true,
  path = '$',
): string[] {
  const ref = schema['$ref'];
  if (typeof ref === 'string') {
    const name = ref.replace('#/components/schemas/', '');
    const target = components[name];
    if (target === undefined) return [`${path}: unresolved $ref ${ref}`];
    return validate(value, target, components, strict, path);
  }
  const problems: string[] = [];
  const oneOf = schema['oneOf'];
  if (Array.isArray(oneOf)) {
    const matching = oneOf.filter((s) => validate(value, s as Schema, components, strict, path).length === 0);
    if (matching.length !== 1) problems.push(`${path}: matches ${matching.length} of the oneOf alternatives`);
    return problems;
  }
  const type = schema['type'];
  if (type !== undefined) {
    const types = Array.isArray(type) ? (type as string[]) : [type as string];
    if (!types.some((t) => matchesType(value, t))) {
      return [`${path}: expected ${types.join(' or ')}, got ${typeOf(value)}`];
    }
  }
  const allowed = schema['enum'];
  if (Array.isArray(allowed) && !allowed.includes(value))
    problems.push(`${path}: ${JSON.stringify(value)} not in enum`);
  const minimum = schema['minimum'];
  if (typeof minimum === 'number' && typeof value === 'number' && value < minimum) {
    problems.push(`${path}: ${value} below ${minimum}`);
  }
  if (typeOf(value) === 'object') {
    const object = value as Record<string, unknown>;
    const properties = (schema['properties'] ?? {}) as Record<string, Schema>;
    for (const name of (schema['required'] ?? []) as string[]) {
      if (!(name in object)) problems.push(`${path}: missing required ${name}`);
    }
    for (const [name, v] of Object.entries(object)) {
      const property = properties[name];
      const additional = schema['additionalProperties'];
      if (property !== undefined) problems.push(...validate(v, property, components, strict, `${path}.${name}`));
      else if (typeof additional === 'object' && additional !== null) {
        problems.push(...validate(v, additional as Schema, components, strict, `${path}.${name}`));
      } else if (additional === false || (strict && additional === undefined && schema['properties'] !== undefined)) {
        problems.push(`${path}: undocumented property ${name}`);
      }
    }
  }
  if (Array.isArray(value) && typeof schema['items'] === 'object') {
    value.forEach((item, i) =>
      problems.push(...validate(item, schema['items'] as Schema, components, strict, `${path}[${i}]`)),
    );
  }
  return problems;
}
