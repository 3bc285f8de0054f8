// Strict JSON: a tool's result must survive the trip to Python unchanged.
// JSON.stringify would silently drop functions, turn NaN into null and throw
// on BigInt or cycles without saying where; this says exactly what is wrong.

export class NotJsonError extends Error {}

function kindOf(value) {
  if (typeof value !== "object") return typeof value;
  return value.constructor?.name ?? "object without prototype";
}

export function toJson(value, path = "result", seen = new Set()) {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new NotJsonError(`${path} is ${value}, which JSON cannot carry`);
    return value;
  }
  if (value === undefined) return null;
  if (typeof value !== "object") throw new NotJsonError(`${path} is a ${kindOf(value)}, which is not JSON`);
  if (typeof value.toJSON === "function") return toJson(value.toJSON(), path, seen); // Date, URL
  if (seen.has(value)) throw new NotJsonError(`${path} refers back to itself (a cycle), which is not JSON`);
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((item, index) => toJson(item, `${path}[${index}]`, seen));
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      throw new NotJsonError(
        `${path} is a ${kindOf(value)}, which is not JSON; return plain objects, arrays, strings, numbers, booleans or null`,
      );
    }
    const out = {};
    for (const [key, item] of Object.entries(value)) {
      if (item === undefined) continue; // an absent optional field, as JSON.stringify does
      out[key] = toJson(item, `${path}.${key}`, seen);
    }
    return out;
  } finally {
    seen.delete(value);
  }
}
