// A tool's JSON-schema parameters written as the TypeScript-like type harmony puts in the developer message's
// `namespace functions { … }`, as openai/harmony's renderer writes it (src/encoding.rs json_schema_to_typescript):
// descriptions as `//` comments above a field, `?` on fields not required, `// default: …` after one, string enums as
// unions, integer as number, arrays as `T[]`, anything else `any`.

type Schema = Record<string, unknown>;

function isSchema(value: unknown): value is Schema {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function isEnum(schema: Schema): boolean {
  return Array.isArray(schema["enum"]) && schema["enum"].length > 0;
}

/** serde_json's Display of a value: compact JSON. */
function compact(value: unknown): string {
  return JSON.stringify(value);
}

/** The `default: …` comment text: a string default quoted unless the field is an enum. */
function defaultText(schema: Schema, value: unknown): string {
  if (typeof value === "string") return isEnum(schema) ? `default: ${value}` : `default: "${value}"`;
  return `default: ${compact(value)}`;
}

function nullable(schema: Schema, type: string): string {
  return schema["nullable"] === true && !type.includes("null") ? `${type} | null` : type;
}

function variantComments(variant: Schema, skipDescription: boolean, propertyDescription: unknown): string[] {
  const comments: string[] = [];
  const description = variant["description"];
  if (!skipDescription && typeof description === "string" && description !== propertyDescription)
    comments.push(description);
  if ("default" in variant) comments.push(defaultText(variant, variant["default"]));
  return comments;
}

function oneOfProperty(key: string, val: Schema, variants: unknown[], required: boolean, indent: string): string {
  let out = "";
  const description = typeof val["description"] === "string" ? val["description"] : undefined;
  const first = isSchema(variants[0]) ? variants[0] : {};
  const skip = description !== undefined && first["description"] === description;
  let above = false;
  if (!skip && description !== undefined) {
    out += `${indent}// ${description}\n`;
    above = true;
  }
  if ("default" in val) {
    const d = val["default"];
    out += typeof d === "string" ? `${indent}// ${defaultText(val, d)}\n` : `${indent}// default: ${compact(d)}\n`;
  }
  out += `${indent}${key}${required ? "" : "?"}:\n`;
  variants.forEach((raw, i) => {
    const variant = isSchema(raw) ? raw : {};
    out += `${indent} | ${nullable(variant, toTypeScript(variant, `${indent}   `))}`;
    const comments = variantComments(variant, i === 0 && above, description);
    if (comments.length > 0) out += ` // ${comments.join(" ")}`;
    out += "\n";
  });
  return out + `${indent},\n`;
}

function objectType(schema: Schema, indent: string): string {
  let out = "";
  if (typeof schema["description"] === "string") out += `${indent}// ${schema["description"]}\n`;
  out += "{\n";
  const required = new Set(
    Array.isArray(schema["required"]) ? schema["required"].filter((r) => typeof r === "string") : [],
  );
  const properties = isSchema(schema["properties"]) ? schema["properties"] : {};
  for (const [key, raw] of Object.entries(properties)) {
    const val = isSchema(raw) ? raw : {};
    if (typeof val["title"] === "string") out += `${indent}// ${val["title"]}\n${indent}//\n`;
    const oneOf = val["oneOf"];
    if (oneOf === undefined && typeof val["description"] === "string") out += `${indent}// ${val["description"]}\n`;
    const examples = val["examples"];
    if (Array.isArray(examples) && examples.length > 0) {
      out += `${indent}// Examples:\n`;
      for (const example of examples) if (typeof example === "string") out += `${indent}// - "${example}"\n`;
    }
    if (Array.isArray(oneOf)) {
      out += oneOfProperty(key, val, oneOf, required.has(key), indent);
      continue;
    }
    out += `${indent}${key}${required.has(key) ? "" : "?"}: `;
    out += nullable(val, toTypeScript(val, `${indent}    `)) + ",";
    if (oneOf === undefined && "default" in val) out += ` // ${defaultText(val, val["default"])}`;
    out += "\n";
  }
  return out + `${indent}}`;
}

export function toTypeScript(schema: Schema, indent: string): string {
  const oneOf = schema["oneOf"];
  if (Array.isArray(oneOf)) {
    let out = "";
    for (const raw of oneOf) {
      const variant = isSchema(raw) ? raw : {};
      out += `\n${indent} | ${nullable(variant, toTypeScript(variant, `${indent}   `))}`;
      const comments = variantComments(variant, false, undefined);
      if (comments.length > 0) out += ` // ${comments.join(" ")}`;
    }
    return out;
  }
  const type = schema["type"];
  if (Array.isArray(type)) {
    const names = type.filter((t) => typeof t === "string").map((t) => (t === "integer" ? "number" : t));
    if (names.length > 0) return names.join(" | ");
  }
  switch (type) {
    case "object":
      return objectType(schema, indent);
    case "string": {
      const values = Array.isArray(schema["enum"]) ? schema["enum"].filter((v) => typeof v === "string") : [];
      return values.length > 0 ? values.map((v) => `"${v}"`).join(" | ") : "string";
    }
    case "number":
    case "integer":
      return "number";
    case "boolean":
      return "boolean";
    case "array":
      return isSchema(schema["items"]) ? `${toTypeScript(schema["items"], indent)}[]` : "Array<any>";
    default:
      return "any";
  }
}

/** Rust's `str::lines`: split at "\n" (a "\r" before it dropped), no empty line after a final newline. */
export function rustLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n").map((line) => (line.endsWith("\r") ? line.slice(0, -1) : line));
  if (text.endsWith("\n")) lines.pop();
  return lines;
}

/** A function tool as harmony declares it: its description as comments, then its type. */
export function toolDeclaration(name: string, description: string, parameters: unknown): string {
  const lines = rustLines(description).map((line) => `// ${line}`);
  const type = isSchema(parameters) ? `(_: ${toTypeScript(parameters, "")})` : "()";
  return [...lines, `type ${name} = ${type} => any;\n`].join("\n");
}
